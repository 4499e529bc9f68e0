#include "npu/NPUPluggableAllocator.h"

#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/impl/AclInterface.h"

namespace c10_npu::NPUCachingAllocator {
namespace {

// The installed pluggable allocator, for the deleter of its DataPtrs: only
// the installed one allocates tensors, and it is never replaced.
PluggableAllocator* g_installed = nullptr;

void delete_pluggable(void* ptr) {
  g_installed->raw_delete(ptr);
}

} // namespace

PluggableAllocator::PluggableAllocator(PluggableAllocFn alloc_fn, PluggableFreeFn free_fn)
    : alloc_fn_(alloc_fn), free_fn_(free_fn) {
  TORCH_CHECK(alloc_fn != nullptr && free_fn != nullptr,
              "NPUPluggableAllocator: the allocation and free functions must not be null");
}

void* PluggableAllocator::alloc(size_t nbytes, int device, aclrtStream stream) {
  if (nbytes == 0) {
    return nullptr;
  }
  void* ptr = alloc_fn_(static_cast<ssize_t>(nbytes), device, stream);
  TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr, "NPUPluggableAllocator: the allocation function returned null for ",
                   nbytes, " bytes on npu:", device);
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_.emplace(ptr, Allocation{nbytes, device, stream});
  return ptr;
}

c10::DataPtr PluggableAllocator::allocate(size_t nbytes) {
  const c10::DeviceIndex device = current_device();
  void* ptr = alloc(nbytes, device, getCurrentNPUStream(device).stream());
  return {ptr, ptr, ptr == nullptr ? nullptr : &delete_pluggable, c10::Device(c10::DeviceType::PrivateUse1, device)};
}

c10::DeleterFnPtr PluggableAllocator::raw_deleter() const {
  return &delete_pluggable;
}

void PluggableAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  if (count == 0) {
    return;
  }
  const NPUStream stream = getCurrentNPUStream();
  NPU_CHECK(acl::api().aclrtMemcpyAsync(dest, count, src, count, ACL_MEMCPY_DEVICE_TO_DEVICE, stream.stream()));
  stream.synchronize();
}

bool PluggableAllocator::initialized() {
  return true;
}

void PluggableAllocator::emptyCache(c10::MempoolId_t /*mempool_id*/) {}

void PluggableAllocator::recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) {}

DeviceStats PluggableAllocator::getDeviceStats(c10::DeviceIndex /*device*/) {
  return {};
}

void PluggableAllocator::resetAccumulatedStats(c10::DeviceIndex /*device*/) {}

void PluggableAllocator::resetPeakStats(c10::DeviceIndex /*device*/) {}

void* PluggableAllocator::raw_alloc(size_t nbytes) {
  const c10::DeviceIndex device = current_device();
  return alloc(nbytes, device, getCurrentNPUStream(device).stream());
}

void* PluggableAllocator::raw_alloc_with_stream(size_t nbytes, aclrtStream stream) {
  return alloc(nbytes, current_device(), stream);
}

void PluggableAllocator::raw_delete(void* ptr) {
  if (ptr == nullptr) {
    return;
  }
  Allocation allocation{};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocations_.find(ptr);
    TORCH_CHECK(it != allocations_.end(), "NPUPluggableAllocator: ", ptr,
                " was not allocated by this allocator");
    allocation = it->second;
    allocations_.erase(it);
  }
  free_fn_(ptr, static_cast<ssize_t>(allocation.size), allocation.device, allocation.stream);
}

void PluggableAllocator::set_memory_fraction(double /*fraction*/, c10::DeviceIndex /*device*/) {
  TORCH_CHECK(false, "set_per_process_memory_fraction: the current npu allocator is an NPUPluggableAllocator, "
              "which has no memory fraction");
}

double PluggableAllocator::get_memory_fraction(c10::DeviceIndex /*device*/) {
  return 1.0;
}

void PluggableAllocator::empty_cache_all() {}

void changeCurrentAllocator(std::shared_ptr<NPUAllocator> allocator) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  TORCH_CHECK(allocator != nullptr, "change_current_allocator: no allocator given");
  auto* pluggable = dynamic_cast<PluggableAllocator*>(allocator.get());
  TORCH_CHECK(pluggable != nullptr, "change_current_allocator: only an NPUPluggableAllocator can be installed");
  TORCH_CHECK(g_installed == nullptr,
              "change_current_allocator: an NPUPluggableAllocator is installed already; the allocator can "
              "be changed only once, before the first npu tensor is allocated");
  // Kept alive for the process: tensors it allocated may outlive any owner.
  auto* kept = new std::shared_ptr<NPUAllocator>(std::move(allocator));
  g_installed = pluggable;
  if (!installCurrentAllocator(kept->get())) {
    g_installed = nullptr;
    delete kept;
    TORCH_CHECK(false,
                "change_current_allocator: the NPU caching allocator has already allocated npu memory; "
                "change the allocator before the first npu tensor is created (e.g. right after "
                "import torch_npu)");
  }
}

} // namespace c10_npu::NPUCachingAllocator
