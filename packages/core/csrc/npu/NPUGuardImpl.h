// c10::impl::DeviceGuardImplInterface for npu, modelled on CUDAGuardImpl:
// device and stream guards, generic torch.Stream / torch.Event support, and
// the allocator's record_stream hook.
#pragma once

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/InlineDeviceGuard.h>
#include <c10/core/impl/InlineStreamGuard.h>

#include "npu/Macros.h"

namespace c10_npu::impl {

struct TORCH_NPU_API NPUGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = c10::DeviceType::PrivateUse1;

  NPUGuardImpl() = default;
  explicit NPUGuardImpl(c10::DeviceType t);

  c10::DeviceType type() const override;
  c10::Device exchangeDevice(c10::Device d) const override;
  c10::Device getDevice() const override;
  void setDevice(c10::Device d) const override;
  void uncheckedSetDevice(c10::Device d) const noexcept override;
  // torch.accelerator.get_device_capability: the dtypes npu tensors can be
  // made in and converted from and to.
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override;
  c10::Stream getStream(c10::Device d) const override;
  c10::Stream getDefaultStream(c10::Device d) const override;
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool isHighPriority = false) const override;
  c10::Stream getNewStream(c10::Device d, int priority = 0) const override;
  c10::Stream exchangeStream(c10::Stream s) const override;
  void* getStreamNativeHandle(const c10::Stream s) const override;
  c10::DeviceIndex deviceCount() const noexcept override;

  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override;
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override;
  void block(void* event, const c10::Stream& stream) const override;
  bool queryEvent(void* event) const override;
  void synchronizeEvent(void* event) const override;
  double elapsedTime(void* start, void* end, const c10::DeviceIndex device_index) const override;

  bool queryStream(const c10::Stream& stream) const override;
  void synchronizeStream(const c10::Stream& stream) const override;
  bool isStreamCapturing(const c10::Stream& stream) const override;
  void synchronizeDevice(const c10::DeviceIndex device_index) const override;
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override;
};

} // namespace c10_npu::impl

namespace c10_npu {

// RAII guards, as c10::cuda::CUDAGuard and CUDAStreamGuard.
using NPUGuard = c10::impl::InlineDeviceGuard<impl::NPUGuardImpl>;
using OptionalNPUGuard = c10::impl::InlineOptionalDeviceGuard<impl::NPUGuardImpl>;
using NPUStreamGuard = c10::impl::InlineStreamGuard<impl::NPUGuardImpl>;

} // namespace c10_npu
