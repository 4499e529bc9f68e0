// An allocator of npu tensor memory from two C functions of the user's
// (torch.npu.memory.NPUPluggableAllocator, as torch.cuda's
// CUDAPluggableAllocator and torch_npu's NPUPluggableAllocator).
//
// Note [Pluggable allocators]
// change_current_allocator makes NPUCachingAllocator::get(), which allocates
// every npu tensor, return a PluggableAllocator: tensor memory then comes
// from `alloc_fn(size, device, stream)` on the current device and stream,
// and goes back through `free_fn(ptr, size, device, stream)` with the same
// values when the tensor is freed. It must happen before the caching
// allocator allocated any tensor memory (memory it gave out would be freed
// to the wrong allocator), and only once; later calls raise c10::Error.
// What stays with the caching allocator: device-work memory (Note
// [Device-work memory]), which device work frees before it ends, and
// private pools (graphs, MemPool), which refuse to start with a pluggable
// allocator installed. The pluggable allocator keeps no cache and no
// statistics (memory_stats() reads zeros); record_stream does nothing: the
// functions get their memory back at the tensor's free, and ordering
// another stream's use of it is the allocator's business, as with CUDA's.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <unordered_map>

#include "npu/NPUCachingAllocator.h"

namespace c10_npu::NPUCachingAllocator {

using PluggableAllocFn = void* (*)(ssize_t size, int device, aclrtStream stream);
using PluggableFreeFn = void (*)(void* ptr, ssize_t size, int device, aclrtStream stream);

class TORCH_NPU_API PluggableAllocator final : public NPUAllocator {
 public:
  PluggableAllocator(PluggableAllocFn alloc_fn, PluggableFreeFn free_fn);

  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;
  bool initialized() override;
  void emptyCache(c10::MempoolId_t mempool_id) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  void* raw_alloc(size_t nbytes) override;
  void* raw_alloc_with_stream(size_t nbytes, aclrtStream stream) override;
  void raw_delete(void* ptr) override;
  void set_memory_fraction(double fraction, c10::DeviceIndex device) override;
  double get_memory_fraction(c10::DeviceIndex device) override;
  void empty_cache_all() override;

 private:
  struct Allocation {
    size_t size;
    int device;
    aclrtStream stream;
  };

  void* alloc(size_t nbytes, int device, aclrtStream stream);

  const PluggableAllocFn alloc_fn_;
  const PluggableFreeFn free_fn_;
  std::mutex mutex_;
  std::unordered_map<void*, Allocation> allocations_; // behind mutex_
};

// Note [Pluggable allocators]: installs `allocator` (kept alive from then
// on) as the allocator of npu tensors.
TORCH_NPU_API void changeCurrentAllocator(std::shared_ptr<NPUAllocator> allocator);

} // namespace c10_npu::NPUCachingAllocator
