#include "libs/init_npu.h"

#include <optional>

#include <c10/core/DeviceType.h>
#include <c10/util/Exception.h>

#include "npu/NPUCachingAllocator.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUHostAllocator.h"
#include "npu/impl/RuntimeFinalize.h"

namespace torch_npu {
namespace {

constexpr const char* kDeviceTypeName = "npu";

// Note [The C++ runtime without Python]: "npu" names PrivateUse1 once
// registered; `import torch_npu` registers it the same way in Python.
void register_device_type_name() {
  if (!c10::is_privateuse1_backend_registered()) {
    c10::register_privateuse1_backend(kDeviceTypeName);
  }
  const std::string registered = c10::get_privateuse1_backend(/*lower_case=*/true);
  TORCH_CHECK(
      registered == kDeviceTypeName,
      "torch_npu::init_npu: this process named the PrivateUse1 device type '", registered,
      "', so it cannot be named 'npu'; torch_npu needs that name, and one process "
      "can use only one PrivateUse1 backend.");
}

} // namespace

void init_npu(c10::DeviceIndex device_index) {
  register_device_type_name();
  c10_npu::lazy_init();
  c10_npu::set_device(device_index);
}

void init_npu(const std::string& device_str) {
  // Device strings name PrivateUse1 "npu" only once that name is registered.
  register_device_type_name();
  std::optional<c10::Device> device;
  try {
    device.emplace(device_str);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "torch_npu::init_npu: '", device_str,
                "' is not a device string; expected 'npu' or 'npu:<index>' such as 'npu:0' (",
                e.what_without_backtrace(), ")");
  }
  TORCH_CHECK(device->is_privateuseone(), "torch_npu::init_npu: '", device_str,
              "' is not an npu device; expected 'npu' or 'npu:<index>' such as 'npu:0'.");
  init_npu(device->has_index() ? device->index() : c10::DeviceIndex{0});
}

void init_npu(const c10::Device& device) {
  register_device_type_name();
  TORCH_CHECK(device.is_privateuseone(), "torch_npu::init_npu: ", device.str(),
              " is not an npu device; pass c10::Device(c10::DeviceType::PrivateUse1, <index>) "
              "or a string such as \"npu:0\".");
  init_npu(device.has_index() ? device.index() : c10::DeviceIndex{0});
}

void finalize_npu() {
  if (!c10_npu::is_initialized()) {
    return;
  }
  // Queued work may still read memory the caches would release.
  for (c10::DeviceIndex index = 0; index < c10_npu::device_count(); ++index) {
    if (c10_npu::is_device_initialized(index)) {
      c10_npu::device_synchronize(index);
    }
  }
  c10_npu::NPUCachingAllocator::emptyCache();
  c10_npu::NPUHostAllocator::get()->empty_cache();
  c10_npu::finalize_runtime();
}

} // namespace torch_npu
