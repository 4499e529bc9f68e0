#include "npu/NPUEvent.h"

#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/impl/AclInterface.h"

namespace c10_npu {

NPUEvent::~NPUEvent() {
  if (event_ != nullptr && !is_in_bad_fork()) {
    NPU_WARN_IF_ERROR(acl::api().aclrtDestroyEvent(event_));
  }
}

NPUEvent& NPUEvent::operator=(NPUEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) {
      NPU_WARN_IF_ERROR(acl::api().aclrtDestroyEvent(event_));
    }
    move_from(other);
  }
  return *this;
}

void NPUEvent::move_from(NPUEvent& other) noexcept {
  flags_ = other.flags_;
  was_recorded_ = other.was_recorded_;
  device_index_ = other.device_index_;
  event_ = other.event_;
  other.event_ = nullptr;
  other.was_recorded_ = false;
}

void NPUEvent::record() {
  record(getCurrentNPUStream());
}

void NPUEvent::record(const NPUStream& stream) {
  if (event_ == nullptr) {
    device_index_ = stream.device_index();
    ensure_device_context(device_index_);
    NPU_CHECK(acl::api().aclrtCreateEventWithFlag(&event_, flags_));
  }
  TORCH_CHECK(
      device_index_ == stream.device_index(), "Event was created on npu:",
      static_cast<int>(device_index_), " but is recorded on a stream of npu:",
      static_cast<int>(stream.device_index()),
      "; record it on a stream of its own device.");
  ensure_device_context(device_index_);
  NPU_CHECK(acl::api().aclrtRecordEvent(event_, stream.stream()));
  was_recorded_ = true;
}

void NPUEvent::block(const NPUStream& stream) const {
  if (!was_recorded_) {
    return;
  }
  ensure_device_context(stream.device_index());
  NPU_CHECK(acl::api().aclrtStreamWaitEvent(stream.stream(), event_));
}

bool NPUEvent::query() const {
  if (!was_recorded_) {
    return true;
  }
  aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
  NPU_CHECK(acl::api().aclrtQueryEventStatus(event_, &status));
  return status == ACL_EVENT_RECORDED_STATUS_COMPLETE;
}

void NPUEvent::synchronize() const {
  if (was_recorded_) {
    NPU_CHECK(acl::api().aclrtSynchronizeEvent(event_));
  }
}

float NPUEvent::elapsed_time(const NPUEvent& end) const {
  TORCH_CHECK(
      (flags_ & ACL_EVENT_TIME_LINE) && (end.flags_ & ACL_EVENT_TIME_LINE),
      "Both events must be created with enable_timing=True to measure elapsed time.");
  TORCH_CHECK(
      was_recorded_ && end.was_recorded_,
      "Both events must be recorded before calculating elapsed time.");
  float ms = 0;
  NPU_CHECK(acl::api().aclrtEventElapsedTime(&ms, event_, end.event_));
  return ms;
}

} // namespace c10_npu
