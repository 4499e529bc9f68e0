// Device and host allocation, memory information, pointer attributes and
// virtual memory management.
#include <cstring>

#include "api_impl.h"
#include "device.h"
#include "errors.h"
#include "feature_gates.h"
#include "runtime.h"
#include "util.h"

namespace npu_sim::impl {
namespace {

uintptr_t addr(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

bool inVmmPart(const AddressLayout& layout, uintptr_t p) {
  return layout.inDeviceRange(p) && layout.windowOffset(p) >= layout.heap_size;
}

// Checks shared by every VMM function.
aclError vmmEntry(const char* api) {
  if (aclError err = Runtime::get().check(api); err != ACL_SUCCESS) {
    return err;
  }
  return requireFeature(Feature::kVirtualMemory, api);
}

// The initialised device owning physical handle `handle`, or null.
Device* handleOwner(Runtime& rt, const PhysicalHandle* handle) {
  for (uint32_t d = 0; d < rt.deviceCount(); ++d) {
    Device& device = rt.device(d);
    if (device.initialized() && device.memory().ownsHandle(handle)) {
      return &device;
    }
  }
  return nullptr;
}

aclError notAHandle(const char* api, aclrtDrvMemHandle handle) {
  return fail(ACL_ERROR_INVALID_PARAM,
              "%s: %p is not a live physical memory handle (aclrtMallocPhysical)", api, handle);
}

aclError notVmm(const char* api, const void* p) {
  return fail(ACL_ERROR_INVALID_PARAM,
              "%s: %p is not in the virtual memory window of any device "
              "(aclrtReserveMemAddress)",
              api, p);
}

} // namespace

// ---------------------------------------------------------------------------
// aclrtMalloc / aclrtFree / aclrtGetMemInfo

aclError mallocDevice(void** devPtr, size_t size, aclrtMemMallocPolicy /*policy*/) {
  // The policy (huge/normal pages, P2P) changes nothing on the host.
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("aclrtMalloc"); err != ACL_SUCCESS) {
    return err;
  }
  if (devPtr == nullptr || size == 0) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: %s",
                devPtr == nullptr ? "devPtr is null" : "size is 0");
  }
  Device* device = nullptr;
  if (aclError err = rt.currentDevice("aclrtMalloc", &device); err != ACL_SUCCESS) {
    return err;
  }
  return device->memory().allocate(devPtr, size);
}

aclError freeDevice(void* devPtr) {
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("aclrtFree"); err != ACL_SUCCESS) {
    return err;
  }
  const AddressLayout& layout = rt.layout();
  const uintptr_t p = addr(devPtr);
  if (devPtr == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: devPtr is null");
  }
  if (!layout.inDeviceRange(p)) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: %p is not device memory%s", devPtr,
                layout.inAccessRange(p)
                    ? " (it is a host-access alias: pass the device address)"
                    : "");
  }
  if (inVmmPart(layout, p)) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtFree: %p is virtual memory of aclrtReserveMemAddress; release it with "
                "aclrtUnmapMem and aclrtReleaseMemAddress",
                devPtr);
  }
  return rt.windowMemory(p).free(devPtr);
}

aclError getMemInfo(aclrtMemAttr attr, size_t* free, size_t* total) {
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("aclrtGetMemInfo"); err != ACL_SUCCESS) {
    return err;
  }
  if (free == nullptr || total == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: free or total is null");
  }
  if (static_cast<int>(attr) < ACL_DDR_MEM || static_cast<int>(attr) > ACL_HBM_MEM_P2P_HUGE1G) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: unknown memory attribute %d",
                static_cast<int>(attr));
  }
  Device* device = nullptr;
  if (aclError err = rt.currentDevice("aclrtGetMemInfo", &device); err != ACL_SUCCESS) {
    return err;
  }
  // One kind of memory: every attribute reports the device's capacity.
  device->memory().memInfo(free, total);
  return ACL_SUCCESS;
}

// ---------------------------------------------------------------------------
// Host memory

aclError mallocHost(void** hostPtr, size_t size) {
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("aclrtMallocHost"); err != ACL_SUCCESS) {
    return err;
  }
  return rt.host().allocate(hostPtr, size);
}

aclError freeHost(void* hostPtr) {
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("aclrtFreeHost"); err != ACL_SUCCESS) {
    return err;
  }
  if (hostPtr == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: hostPtr is null");
  }
  return rt.host().free(hostPtr);
}

// ---------------------------------------------------------------------------
// aclrtPointerGetAttributes

aclError pointerGetAttributes(const void* ptr, aclrtPtrAttributes* attributes) {
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("aclrtPointerGetAttributes"); err != ACL_SUCCESS) {
    return err;
  }
  if (ptr == nullptr || attributes == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtPointerGetAttributes: %s is null",
                ptr == nullptr ? "ptr" : "attributes");
  }
  std::memset(attributes, 0, sizeof(*attributes));
  const uintptr_t p = addr(ptr);
  const AddressLayout& layout = rt.layout();
  DeviceAddressInfo info;
  if (layout.inDeviceRange(p)) {
    if (rt.windowMemory(p).lookup(p, &info)) {
      attributes->location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
      attributes->location.id = info.device;
      attributes->pageSize = info.page_size;
      return ACL_SUCCESS;
    }
  } else if (rt.host().contains(p)) {
    attributes->location.type = ACL_MEM_LOCATION_TYPE_HOST;
    attributes->location.id = 0;
    attributes->pageSize = static_cast<uint32_t>(kPageSize);
    return ACL_SUCCESS;
  }
  attributes->location.type = ACL_MEM_LOCATION_TYPE_UNREGISTERED;
  return ACL_SUCCESS;
}

aclError getHostAccessOffset(intptr_t* offset) {
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check("npuSimGetHostAccessOffset"); err != ACL_SUCCESS) {
    return err;
  }
  if (offset == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "npuSimGetHostAccessOffset: offset is null");
  }
  *offset = rt.layout().access_delta;
  return ACL_SUCCESS;
}

// ---------------------------------------------------------------------------
// Virtual memory management

aclError memGetAllocationGranularity(aclrtPhysicalMemProp* prop,
                                     aclrtMemGranularityOptions option, size_t* granularity) {
  const char* api = "aclrtMemGetAllocationGranularity";
  if (aclError err = vmmEntry(api); err != ACL_SUCCESS) {
    return err;
  }
  if (prop == nullptr || granularity == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: %s is null", api,
                prop == nullptr ? "prop" : "granularity");
  }
  if (option != ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM &&
      option != ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: unknown option %d", api, static_cast<int>(option));
  }
  *granularity = kVmmGranularity;
  return ACL_SUCCESS;
}

aclError reserveMemAddress(void** virPtr, size_t size, size_t alignment, void* expectPtr,
                           uint64_t flags) {
  const char* api = "aclrtReserveMemAddress";
  if (aclError err = vmmEntry(api); err != ACL_SUCCESS) {
    return err;
  }
  if (virPtr == nullptr || flags != 0) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: %s", api,
                virPtr == nullptr ? "virPtr is null" : "flags must be 0");
  }
  Device* device = nullptr;
  if (aclError err = Runtime::get().currentDevice(api, &device); err != ACL_SUCCESS) {
    return err;
  }
  return device->memory().reserve(virPtr, size, alignment, expectPtr);
}

aclError releaseMemAddress(void* virPtr) {
  const char* api = "aclrtReleaseMemAddress";
  if (aclError err = vmmEntry(api); err != ACL_SUCCESS) {
    return err;
  }
  Runtime& rt = Runtime::get();
  if (!inVmmPart(rt.layout(), addr(virPtr))) {
    return notVmm(api, virPtr);
  }
  return rt.windowMemory(addr(virPtr)).release(virPtr);
}

aclError mallocPhysical(aclrtDrvMemHandle* handle, size_t size,
                        const aclrtPhysicalMemProp* prop, uint64_t flags) {
  const char* api = "aclrtMallocPhysical";
  if (aclError err = vmmEntry(api); err != ACL_SUCCESS) {
    return err;
  }
  if (handle == nullptr || prop == nullptr || flags != 0) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: %s", api,
                handle == nullptr ? "handle is null"
                                  : (prop == nullptr ? "prop is null" : "flags must be 0"));
  }
  if (prop->location.type != ACL_MEM_LOCATION_TYPE_DEVICE) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: prop->location.type must be ACL_MEM_LOCATION_TYPE_DEVICE", api);
  }
  Runtime& rt = Runtime::get();
  Device* device = nullptr;
  if (aclError err = rt.deviceById(prop->location.id, api, &device); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = device->ensureInitialized(); err != ACL_SUCCESS) {
    return err;
  }
  PhysicalHandle* h = nullptr;
  if (aclError err = device->memory().allocatePhysical(size, &h); err != ACL_SUCCESS) {
    return err;
  }
  *handle = h;
  return ACL_SUCCESS;
}

aclError freePhysical(aclrtDrvMemHandle handle) {
  const char* api = "aclrtFreePhysical";
  if (aclError err = vmmEntry(api); err != ACL_SUCCESS) {
    return err;
  }
  Runtime& rt = Runtime::get();
  auto* h = static_cast<PhysicalHandle*>(handle);
  Device* owner = handle ? handleOwner(rt, h) : nullptr;
  if (owner == nullptr) {
    return notAHandle(api, handle);
  }
  return owner->memory().freePhysical(h);
}

aclError mapMem(void* virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                uint64_t flags) {
  const char* api = "aclrtMapMem";
  if (aclError err = vmmEntry(api); err != ACL_SUCCESS) {
    return err;
  }
  if (flags != 0) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: flags must be 0", api);
  }
  Runtime& rt = Runtime::get();
  if (!inVmmPart(rt.layout(), addr(virPtr))) {
    return notVmm(api, virPtr);
  }
  auto* h = static_cast<PhysicalHandle*>(handle);
  Device* owner = handle ? handleOwner(rt, h) : nullptr;
  PhysicalHandle pinned;
  if (owner == nullptr || !owner->memory().pinHandle(h, &pinned)) {
    return notAHandle(api, handle);
  }
  const aclError err = rt.windowMemory(addr(virPtr)).map(virPtr, size, offset, h, pinned);
  if (err != ACL_SUCCESS) {
    owner->memory().unpinHandle(h);
  }
  return err;
}

aclError unmapMem(void* virPtr) {
  const char* api = "aclrtUnmapMem";
  if (aclError err = vmmEntry(api); err != ACL_SUCCESS) {
    return err;
  }
  Runtime& rt = Runtime::get();
  if (!inVmmPart(rt.layout(), addr(virPtr))) {
    return notVmm(api, virPtr);
  }
  PhysicalHandle* h = nullptr;
  uint32_t owner = 0;
  if (aclError err = rt.windowMemory(addr(virPtr)).unmap(virPtr, &h, &owner);
      err != ACL_SUCCESS) {
    return err;
  }
  rt.device(owner).memory().unpinHandle(h);
  return ACL_SUCCESS;
}

} // namespace npu_sim::impl
