#include "npu/NPUStream.h"

#include <array>
#include <atomic>
#include <mutex>

#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/impl/AclInterface.h"

namespace c10_npu {
namespace {

// Priority levels inside a pool: 0 normal, 1 high.
constexpr int kPriorityLevels = 2;
// CANN stream priorities run from 0 (highest) to 7 (lowest).
constexpr uint32_t kAclPriorityForLevel[kPriorityLevels] = {4, 0};

struct DeviceStreams {
  std::once_flag default_once;
  aclrtStream default_stream = nullptr;
  std::array<std::once_flag, kPriorityLevels> pool_once;
  std::array<std::array<aclrtStream, kStreamsPerPool>, kPriorityLevels> pool{};
  std::array<std::atomic<uint32_t>, kPriorityLevels> next{};
  // Set once the streams above exist. stream() runs on every allocation and
  // launch; libstdc++'s call_once writes thread-locals and calls
  // pthread_once even when done, so these flags keep it off the hot path.
  std::atomic<bool> default_ready{false};
  std::array<std::atomic<bool>, kPriorityLevels> pool_ready{};
};

std::array<DeviceStreams, kMaxDevices>& all_streams() {
  // Leaked on purpose: streams may be used by other static destructors.
  static auto* streams = new std::array<DeviceStreams, kMaxDevices>();
  return *streams;
}

// Per thread, per device: the current stream id (0 = default).
thread_local std::array<c10::StreamId, kMaxDevices> tls_current_ids{};

// Note [StreamId assignment]
// A c10::StreamId of an npu stream reads, from the lowest bit up, as CUDA's:
//
//   bit 0      1: a stream of this process's pools; 0: an external stream
//   bits 1-4   the stream's type: 1 + its priority level (0 normal, 1 high)
//   bits 5-9   its index in the pool
//
// and 0 is the device's default stream. An id with bit 0 clear other than 0
// is an external stream (created by other code and wrapped by
// getStreamFromExternal, torch.npu.ExternalStream): its id is the runtime's
// handle itself, whose lowest bit is 0 (handles are aligned). Ids are stable within a process: they round-trip through Python
// (torch.npu.Stream's stream_id) and through pack3/unpack3.
constexpr int kStreamTypeBits = 4;
constexpr int kStreamIndexBits = 5;
static_assert(kStreamsPerPool <= (1 << kStreamIndexBits));

c10::StreamId pool_stream_id(int level, int index) {
  return ((static_cast<c10::StreamId>(index) << kStreamTypeBits | (level + 1)) << 1) | 1;
}

bool is_pool_stream(c10::StreamId id) {
  return (id & 1) != 0;
}

int level_of(c10::StreamId id) {
  return static_cast<int>(((id >> 1) & ((1 << kStreamTypeBits) - 1)) - 1);
}

int index_of(c10::StreamId id) {
  return static_cast<int>((id >> (1 + kStreamTypeBits)) & ((1 << kStreamIndexBits) - 1));
}

c10::DeviceIndex resolve_device(c10::DeviceIndex device) {
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  return device;
}

aclrtStream default_stream_handle(c10::DeviceIndex device) {
  auto& streams = all_streams()[device];
  if (C10_LIKELY(streams.default_ready.load(std::memory_order_acquire))) {
    return streams.default_stream;
  }
  std::call_once(streams.default_once, [&] {
    ensure_device_context(device);
    NPU_CHECK(acl::api().aclrtCreateStreamWithConfig(
        &streams.default_stream, kAclPriorityForLevel[0], 0));
    streams.default_ready.store(true, std::memory_order_release);
  });
  return streams.default_stream;
}

void ensure_pool(c10::DeviceIndex device, int level) {
  auto& streams = all_streams()[device];
  if (C10_LIKELY(streams.pool_ready[level].load(std::memory_order_acquire))) {
    return;
  }
  std::call_once(streams.pool_once[level], [&] {
    ensure_device_context(device);
    for (int i = 0; i < kStreamsPerPool; ++i) {
      NPU_CHECK(acl::api().aclrtCreateStreamWithConfig(
          &streams.pool[level][i], kAclPriorityForLevel[level], 0));
    }
    streams.pool_ready[level].store(true, std::memory_order_release);
  });
}

NPUStream make_stream(c10::DeviceIndex device, c10::StreamId id) {
  return NPUStream(
      NPUStream::UNCHECKED,
      c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id));
}

} // namespace

aclrtStream NPUStream::stream() const {
  const auto device = device_index();
  const auto id = this->id();
  if (id == 0) {
    return default_stream_handle(device);
  }
  if (!is_pool_stream(id)) {
    return reinterpret_cast<aclrtStream>(id); // Note [StreamId assignment]
  }
  const int level = level_of(id);
  TORCH_CHECK(
      level >= 0 && level < kPriorityLevels && pool_stream_id(level, index_of(id)) == id,
      "Invalid NPU stream id ", id, " on npu:", static_cast<int>(device));
  ensure_pool(device, level);
  return all_streams()[device].pool[level][index_of(id)];
}

bool NPUStream::query() const {
  ensure_device_context(device_index());
  aclrtStreamStatus status = ACL_STREAM_STATUS_RESERVED;
  NPU_CHECK(acl::api().aclrtStreamQuery(stream(), &status));
  return status == ACL_STREAM_STATUS_COMPLETE;
}

void NPUStream::synchronize() const {
  ensure_device_context(device_index());
  NPU_CHECK(acl::api().aclrtSynchronizeStream(stream()));
}

int NPUStream::priority() const {
  // An external stream counts as normal: torch_npu wraps only those.
  return id() != 0 && is_pool_stream(id()) && level_of(id()) == 1 ? kHighPriority : kNormalPriority;
}

NPUStream getStreamFromPool(const bool isHighPriority, c10::DeviceIndex device) {
  return getStreamFromPool(isHighPriority ? kHighPriority : kNormalPriority, device);
}

NPUStream getStreamFromPool(const int priority, c10::DeviceIndex device) {
  device = resolve_device(device);
  const int level = priority < 0 ? 1 : 0;
  auto& streams = all_streams()[device];
  const uint32_t index = streams.next[level].fetch_add(1) % kStreamsPerPool;
  return make_stream(device, pool_stream_id(level, static_cast<int>(index)));
}

NPUStream getStreamFromExternal(aclrtStream ext_stream, c10::DeviceIndex device) {
  device = resolve_device(device);
  const auto id = static_cast<c10::StreamId>(reinterpret_cast<intptr_t>(ext_stream));
  // Note [StreamId assignment]: the handle is the id, so it must read as
  // neither the default stream (0) nor a pool stream (bit 0 set).
  TORCH_CHECK_VALUE(ext_stream != nullptr && !is_pool_stream(id),
                    "ExternalStream: ", ext_stream, " is not a stream handle of the runtime (",
                    ext_stream == nullptr ? "null; the default stream is torch.npu.default_stream()"
                                          : "handles are aligned pointers",
                    ")");
  return make_stream(device, id);
}

NPUStream getDefaultNPUStream(c10::DeviceIndex device) {
  return make_stream(resolve_device(device), 0);
}

NPUStream getCurrentNPUStream(c10::DeviceIndex device) {
  device = resolve_device(device);
  return make_stream(device, tls_current_ids[device]);
}

void setCurrentNPUStream(NPUStream stream) {
  const auto device = stream.device_index();
  check_device_index(device);
  tls_current_ids[device] = stream.id();
}

std::ostream& operator<<(std::ostream& out, const NPUStream& s) {
  return out << s.unwrap();
}

} // namespace c10_npu
