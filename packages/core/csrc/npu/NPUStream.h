// NPU streams as c10::Streams, modelled on c10/cuda's CUDAStream.
//
// Stream id 0 is each device's default stream. Other streams come from
// per-device pools, one pool per priority, handed out round-robin, so
// creating a torch.npu.Stream is cheap and streams are never destroyed. How
// an id encodes its stream: Note [StreamId assignment] (NPUStream.cpp).
// Each thread has a current stream per device (default stream unless set).
#pragma once

#include <cstdint>
#include <ostream>
#include <tuple>

#include <c10/core/DeviceGuard.h>
#include <c10/core/Stream.h>
#include <c10/util/Exception.h>

#include "cann/acl_types.h"
#include "npu/Macros.h"

namespace c10_npu {

// Streams per pool (per device and priority).
constexpr int kStreamsPerPool = 32;
// Priorities as torch sees them: 0 is normal, -1 is high (lower is higher).
constexpr int kNormalPriority = 0;
constexpr int kHighPriority = -1;

class TORCH_NPU_API NPUStream {
 public:
  enum Unchecked { UNCHECKED };

  explicit NPUStream(c10::Stream stream) : stream_(stream) {
    TORCH_CHECK(
        stream_.device_type() == c10::DeviceType::PrivateUse1,
        "Expected an NPU stream, got a stream of device type ",
        stream_.device_type());
  }
  NPUStream(Unchecked, c10::Stream stream) : stream_(stream) {}

  bool operator==(const NPUStream& other) const noexcept {
    return stream_ == other.stream_;
  }
  bool operator!=(const NPUStream& other) const noexcept {
    return !(*this == other);
  }

  operator c10::Stream() const { return stream_; }
  c10::Stream unwrap() const { return stream_; }
  c10::DeviceIndex device_index() const { return stream_.device_index(); }
  c10::Device device() const { return stream_.device(); }
  c10::StreamId id() const { return stream_.id(); }

  // The runtime's handle; creates the pool's streams on first use.
  aclrtStream stream() const;
  operator aclrtStream() const { return stream(); }

  // True when all work enqueued so far has finished.
  bool query() const;
  // Blocks the calling thread until all work enqueued so far has finished.
  void synchronize() const;
  // torch priority: 0 normal, -1 high.
  int priority() const;

  // (least, greatest) priority, like torch.cuda: (0, -1).
  static std::tuple<int, int> priority_range() {
    return {kNormalPriority, kHighPriority};
  }

  struct c10::StreamData3 pack3() const { return stream_.pack3(); }
  static NPUStream unpack3(
      c10::StreamId stream_id, c10::DeviceIndex device_index,
      c10::DeviceType device_type) {
    return NPUStream(c10::Stream::unpack3(stream_id, device_index, device_type));
  }

 private:
  c10::Stream stream_;
};

// A stream from the device's pool (device -1: current device). Priority is
// torch's: 0 normal, negative high.
TORCH_NPU_API NPUStream getStreamFromPool(const bool isHighPriority = false,
                                         c10::DeviceIndex device = -1);
TORCH_NPU_API NPUStream getStreamFromPool(const int priority,
                                         c10::DeviceIndex device = -1);

// Wraps a stream the runtime created for other code (aclrtCreateStream in
// another library), as c10::cuda::getStreamFromExternal: work and events
// queued on the result go to that stream. The caller keeps it alive and
// names its device. Raises for a null handle or one that cannot be a handle.
TORCH_NPU_API NPUStream getStreamFromExternal(aclrtStream ext_stream, c10::DeviceIndex device = -1);

TORCH_NPU_API NPUStream getDefaultNPUStream(c10::DeviceIndex device = -1);
TORCH_NPU_API NPUStream getCurrentNPUStream(c10::DeviceIndex device = -1);
// Sets the calling thread's current stream for the stream's device.
TORCH_NPU_API void setCurrentNPUStream(NPUStream stream);

TORCH_NPU_API std::ostream& operator<<(std::ostream& out, const NPUStream& s);

} // namespace c10_npu

namespace std {
template <>
struct hash<c10_npu::NPUStream> {
  size_t operator()(c10_npu::NPUStream s) const noexcept {
    return std::hash<c10::Stream>{}(s.unwrap());
  }
};
} // namespace std
