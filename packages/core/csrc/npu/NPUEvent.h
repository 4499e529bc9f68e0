// An NPU event owned by C++ code (the allocators, copies, plugins), modelled
// on c10/cuda's CUDAEvent. The runtime event is created lazily on the device
// of the first stream it is recorded on. Movable, not copyable.
#pragma once

#include <c10/core/Device.h>

#include "cann/acl_types.h"
#include "npu/Macros.h"
#include "npu/NPUStream.h"

namespace c10_npu {

class TORCH_NPU_API NPUEvent {
 public:
  // ACL_EVENT_TIME_LINE in `flags` enables elapsed_time.
  explicit NPUEvent(uint32_t flags = ACL_EVENT_SYNC) : flags_(flags) {}
  ~NPUEvent();

  NPUEvent(const NPUEvent&) = delete;
  NPUEvent& operator=(const NPUEvent&) = delete;
  NPUEvent(NPUEvent&& other) noexcept { move_from(other); }
  NPUEvent& operator=(NPUEvent&& other) noexcept;

  bool is_created() const { return event_ != nullptr; }
  bool was_recorded() const { return was_recorded_; }
  c10::DeviceIndex device_index() const { return device_index_; }
  aclrtEvent event() const { return event_; }

  // Records the event on the current stream / on `stream`.
  void record();
  void record(const NPUStream& stream);
  // Makes future work on `stream` wait for the latest record. A never
  // recorded event makes nothing wait.
  void block(const NPUStream& stream) const;
  // True when the latest record has executed (or it was never recorded).
  bool query() const;
  void synchronize() const;
  // Milliseconds from this event's record to `end`'s.
  float elapsed_time(const NPUEvent& end) const;

 private:
  void move_from(NPUEvent& other) noexcept;

  uint32_t flags_ = ACL_EVENT_SYNC;
  bool was_recorded_ = false;
  c10::DeviceIndex device_index_ = -1;
  aclrtEvent event_ = nullptr;
};

} // namespace c10_npu
