#include "npu/NPUHooks.h"

#include <algorithm>

#include "npu/NPUCachingAllocator.h"
#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUGenerator.h"
#include "npu/NPUHostAllocator.h"
#include "npu/NPUStream.h"
#include "npu/impl/AclInterface.h"

namespace c10_npu {

bool NPUHooksInterface::isBuilt() const {
  return true;
}

bool NPUHooksInterface::isAvailable() const {
  return device_count() > 0;
}

void NPUHooksInterface::init() const {
  lazy_init();
}

bool NPUHooksInterface::hasPrimaryContext(c10::DeviceIndex device_index) const {
  return is_device_initialized(device_index);
}

c10::DeviceIndex NPUHooksInterface::deviceCount() const {
  return device_count();
}

void NPUHooksInterface::setCurrentDevice(c10::DeviceIndex device) const {
  set_device(device);
}

c10::DeviceIndex NPUHooksInterface::getCurrentDevice() const {
  return current_device();
}

c10::DeviceIndex NPUHooksInterface::exchangeDevice(c10::DeviceIndex device) const {
  return exchange_device(device);
}

c10::DeviceIndex NPUHooksInterface::maybeExchangeDevice(c10::DeviceIndex device) const {
  return exchange_device(device);
}

bool NPUHooksInterface::isPinnedPtr(const void* data) const {
  return NPUHostAllocator::is_pinned_ptr(data);
}

at::Allocator* NPUHooksInterface::getPinnedMemoryAllocator() const {
  lazy_init();
  return NPUHostAllocator::get();
}

at::Device NPUHooksInterface::getDeviceFromPtr(void* data) const {
  aclrtPtrAttributes attributes{};
  NPU_CHECK(acl::api().aclrtPointerGetAttributes(data, &attributes));
  TORCH_CHECK(
      attributes.location.type == ACL_MEM_LOCATION_TYPE_DEVICE, "The pointer ", data,
      " is not NPU device memory.");
  return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(attributes.location.id)};
}

const at::Generator& NPUHooksInterface::getDefaultGenerator(c10::DeviceIndex device_index) const {
  return getDefaultNPUGenerator(device_index);
}

at::Generator NPUHooksInterface::getNewGenerator(c10::DeviceIndex device_index) const {
  return createNPUGenerator(device_index);
}

void NPUHooksInterface::resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const {
  TORCH_CHECK(
      storage.resizable(), "Trying to resize an NPU storage that is not resizable");
  const size_t old_bytes = storage.nbytes();
  c10::DataPtr old_data = storage.set_data_ptr(c10::DataPtr());
  c10::DataPtr new_data;
  if (new_bytes > 0) {
    const auto device = old_data.device().index() >= 0 ? old_data.device().index() : current_device();
    const c10::DeviceIndex previous = exchange_device(device);
    new_data = storage.allocator()->allocate(new_bytes);
    const size_t copy_bytes = std::min(old_bytes, new_bytes);
    if (copy_bytes > 0 && old_data.get() != nullptr) {
      const NPUStream stream = getCurrentNPUStream(device);
      NPU_CHECK(acl::api().aclrtMemcpyAsync(
          new_data.get(), new_bytes, old_data.get(), copy_bytes,
          ACL_MEMCPY_DEVICE_TO_DEVICE, stream.stream()));
    }
    exchange_device(previous);
  }
  // The old block goes back to the cache on this stream; stream order keeps
  // the copy above ahead of any reuse.
  storage.set_data_ptr_noswap(std::move(new_data));
  storage.set_nbytes(new_bytes);
}

namespace {
struct RegisterHooks {
  RegisterHooks() {
    at::RegisterPrivateUse1HooksInterface(new NPUHooksInterface());
  }
} g_register_hooks;
} // namespace

} // namespace c10_npu
