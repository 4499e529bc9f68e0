// at::PrivateUse1HooksInterface for npu: what ATen asks of a device backend
// (lazy init, generators, pinned memory, device of a pointer, storage resize).
#pragma once

#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "npu/Macros.h"

namespace c10_npu {

struct TORCH_NPU_API NPUHooksInterface final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override;
  bool isAvailable() const override;
  void init() const override;
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override;
  c10::DeviceIndex deviceCount() const override;
  void setCurrentDevice(c10::DeviceIndex device) const override;
  c10::DeviceIndex getCurrentDevice() const override;
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override;
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override;
  bool isPinnedPtr(const void* data) const override;
  at::Allocator* getPinnedMemoryAllocator() const override;
  at::Device getDeviceFromPtr(void* data) const override;
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override;
  at::Generator getNewGenerator(c10::DeviceIndex device_index = -1) const override;
  // FSDP2 frees and regrows parameter storage through this.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override;
};

} // namespace c10_npu
