#include "npu/NPUGuardImpl.h"
#include "npu/NPUGraphsUtils.h"

#include "npu/NPUCachingAllocator.h"
#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUStream.h"
#include "npu/impl/AclInterface.h"

namespace c10_npu::impl {

NPUGuardImpl::NPUGuardImpl(c10::DeviceType t) {
  TORCH_CHECK(t == static_type, "NPUGuardImpl initialized with non-NPU DeviceType: ", t);
}

c10::DeviceType NPUGuardImpl::type() const {
  return static_type;
}

c10::Device NPUGuardImpl::exchangeDevice(c10::Device d) const {
  TORCH_CHECK(d.is_privateuseone(), "Expected an NPU device, got ", d);
  const auto previous = exchange_device(d.index());
  return {static_type, previous};
}

c10::Device NPUGuardImpl::getDevice() const {
  return {static_type, current_device()};
}

void NPUGuardImpl::setDevice(c10::Device d) const {
  TORCH_CHECK(d.is_privateuseone(), "Expected an NPU device, got ", d);
  set_device(d.index());
}

void NPUGuardImpl::uncheckedSetDevice(c10::Device d) const noexcept {
  // Guards restore the device they found on exit, also while an exception
  // (say, "no such device") unwinds: restoring the device that is current
  // already must not fail a second time.
  if (d.index() == current_device()) {
    return;
  }
  try {
    set_device(d.index());
  } catch (const c10::Error& e) {
    TORCH_WARN("Failed to restore NPU device ", d, ": ", e.what_without_backtrace());
  } catch (const std::exception& e) {
    TORCH_WARN("Failed to restore NPU device ", d, ": ", e.what());
  }
}

c10::DeviceCapability NPUGuardImpl::getDeviceCapability(c10::Device d) const {
  check_device_index(d.index() < 0 ? current_device() : d.index());
  // The dtypes an npu tensor can be made in and converted from and to:
  // conversions run the CPU's copy kernel on the device memory, so these are
  // the dtypes that kernel converts, plus the quantized dtypes npu tensors
  // hold (Note [Quantized npu tensors], the ops package). The bit-field,
  // sub-byte integer and float4 dtypes are left out: the CPU kernel refuses
  // to convert them (and npu refuses the sub-byte quantized ones).
  c10::DeviceCapability capability;
  capability.capability_data.capability_bits = 0;
  for (const auto index : {
           c10::kIndex_Byte, c10::kIndex_Char, c10::kIndex_Short, c10::kIndex_Int, c10::kIndex_Long,
           c10::kIndex_Half, c10::kIndex_Float, c10::kIndex_Double, c10::kIndex_ComplexHalf,
           c10::kIndex_ComplexFloat, c10::kIndex_ComplexDouble, c10::kIndex_Bool, c10::kIndex_BFloat16,
           c10::kIndex_Float8_e5m2, c10::kIndex_Float8_e4m3fn, c10::kIndex_Float8_e5m2fnuz,
           c10::kIndex_Float8_e4m3fnuz, c10::kIndex_Float8_e8m0fnu, c10::kIndex_UInt16, c10::kIndex_UInt32,
           c10::kIndex_UInt64, c10::kIndex_QInt8, c10::kIndex_QUInt8, c10::kIndex_QInt32}) {
    capability.capability_data.capability_bits |= 1ULL << index;
  }
  return capability;
}

c10::Stream NPUGuardImpl::getStream(c10::Device d) const {
  return getCurrentNPUStream(d.index()).unwrap();
}

c10::Stream NPUGuardImpl::getDefaultStream(c10::Device d) const {
  return getDefaultNPUStream(d.index()).unwrap();
}

c10::Stream NPUGuardImpl::getStreamFromGlobalPool(c10::Device d, bool isHighPriority) const {
  return getStreamFromPool(isHighPriority, d.index()).unwrap();
}

c10::Stream NPUGuardImpl::getNewStream(c10::Device d, int priority) const {
  return getStreamFromPool(priority, d.index()).unwrap();
}

c10::Stream NPUGuardImpl::exchangeStream(c10::Stream s) const {
  const NPUStream stream(s);
  const auto previous = getCurrentNPUStream(stream.device_index());
  setCurrentNPUStream(stream);
  return previous.unwrap();
}

void* NPUGuardImpl::getStreamNativeHandle(const c10::Stream s) const {
  return NPUStream(s).stream();
}

c10::DeviceIndex NPUGuardImpl::deviceCount() const noexcept {
  return device_count();
}

void NPUGuardImpl::destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept {
  if (event == nullptr || is_in_bad_fork()) {
    return;
  }
  NPU_WARN_IF_ERROR(acl::api().aclrtDestroyEvent(static_cast<aclrtEvent>(event)));
}

void NPUGuardImpl::record(void** event, const c10::Stream& stream,
                          const c10::DeviceIndex device_index, const c10::EventFlag flag) const {
  TORCH_CHECK(
      device_index == -1 || device_index == stream.device_index(),
      "Event device index ", static_cast<int>(device_index),
      " does not match recording stream's device index ",
      static_cast<int>(stream.device_index()), ".");
  const NPUStream npu_stream(stream);
  ensure_device_context(npu_stream.device_index());
  if (*event == nullptr) {
    const uint32_t acl_flag =
        flag == c10::EventFlag::BACKEND_DEFAULT ? ACL_EVENT_TIME_LINE | ACL_EVENT_SYNC : ACL_EVENT_SYNC;
    aclrtEvent created = nullptr;
    NPU_CHECK(acl::api().aclrtCreateEventWithFlag(&created, acl_flag));
    *event = created;
  }
  NPU_CHECK(acl::api().aclrtRecordEvent(static_cast<aclrtEvent>(*event), npu_stream.stream()));
}

void NPUGuardImpl::block(void* event, const c10::Stream& stream) const {
  if (event == nullptr) {
    return;
  }
  const NPUStream npu_stream(stream);
  ensure_device_context(npu_stream.device_index());
  NPU_CHECK(acl::api().aclrtStreamWaitEvent(npu_stream.stream(), static_cast<aclrtEvent>(event)));
}

bool NPUGuardImpl::queryEvent(void* event) const {
  if (event == nullptr) {
    return true;
  }
  aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
  NPU_CHECK(acl::api().aclrtQueryEventStatus(static_cast<aclrtEvent>(event), &status));
  return status == ACL_EVENT_RECORDED_STATUS_COMPLETE;
}

void NPUGuardImpl::synchronizeEvent(void* event) const {
  if (event == nullptr) {
    return;
  }
  NPU_CHECK(acl::api().aclrtSynchronizeEvent(static_cast<aclrtEvent>(event)));
}

double NPUGuardImpl::elapsedTime(void* start, void* end, const c10::DeviceIndex device_index) const {
  TORCH_CHECK(
      start != nullptr && end != nullptr,
      "Both events must be recorded before calculating elapsed time.");
  float ms = 0;
  NPU_CHECK(acl::api().aclrtEventElapsedTime(
      &ms, static_cast<aclrtEvent>(start), static_cast<aclrtEvent>(end)));
  return static_cast<double>(ms);
}

bool NPUGuardImpl::queryStream(const c10::Stream& stream) const {
  return NPUStream(stream).query();
}

void NPUGuardImpl::synchronizeStream(const c10::Stream& stream) const {
  NPUStream(stream).synchronize();
}

bool NPUGuardImpl::isStreamCapturing(const c10::Stream& stream) const {
  return stream_capture_status(NPUStream(stream)) != CaptureStatus::None;
}

void NPUGuardImpl::synchronizeDevice(const c10::DeviceIndex device_index) const {
  device_synchronize(device_index);
}

void NPUGuardImpl::recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const {
  NPUCachingAllocator::recordStream(data_ptr, NPUStream(stream));
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, NPUGuardImpl);

} // namespace c10_npu::impl
