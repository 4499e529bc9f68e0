// The caching device allocator for npu tensors, modelled on c10/cuda's
// CUDACachingAllocator.
//
// Device memory is taken from the runtime in segments and carved into blocks
// that are cached per stream after free, so steady-state allocation never
// calls the runtime. A block used on another stream (record_stream) returns
// to the cache only once events recorded on those streams complete.
// Statistics use torch.cuda's names (memory_stats). Running out of memory
// first frees the cache, then raises torch.OutOfMemoryError with the numbers.
//
// Device work may allocate too (allocate_device_work_memory, below): those
// blocks are cached under a key of their own, and emptying the cache does not
// hold the allocator's lock while it drains the device.
//
// Segments come from the runtime's malloc in one place (device_malloc), which
// expandable segments (growing one reserved virtual range with the runtime's
// virtual-memory functions) would replace without touching the block logic.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include "npu/Macros.h"
#include "npu/NPUStream.h"

namespace c10_npu::NPUCachingAllocator {

using c10::CachingDeviceAllocator::DeviceStats;

class TORCH_NPU_API NPUAllocator : public c10::DeviceAllocator {
 public:
  // Raw allocation on the current stream of the current device (or `stream`).
  virtual void* raw_alloc(size_t nbytes) = 0;
  virtual void* raw_alloc_with_stream(size_t nbytes, aclrtStream stream) = 0;
  virtual void raw_delete(void* ptr) = 0;
  // Caps this process's reserved memory on `device` at fraction * capacity.
  virtual void set_memory_fraction(double fraction, c10::DeviceIndex device) = 0;
  virtual double get_memory_fraction(c10::DeviceIndex device) = 0;
  // Releases cached blocks of every device.
  virtual void empty_cache_all() = 0;
};

// The process-wide allocator registered for the npu device type.
TORCH_NPU_API NPUAllocator* get();

// Convenience wrappers used by kernels and plugins.
TORCH_NPU_API DeviceStats getDeviceStats(c10::DeviceIndex device);
TORCH_NPU_API void emptyCache();
TORCH_NPU_API void recordStream(const c10::DataPtr& ptr, NPUStream stream);

// Device memory for device work to allocate while it runs: the temporaries
// and results of a CPU kernel running as device work (the ops package), so
// that they count in the device's memory statistics and its capacity. It is
// cached apart from tensor memory, and device work frees it before it ends:
// no queued work ever uses freed device-work memory, so it may be allocated
// and its cache released from device work, which cannot drain the device it
// runs on. Raises torch.OutOfMemoryError; null for 0 bytes.
TORCH_NPU_API void* allocate_device_work_memory(c10::DeviceIndex device, size_t nbytes);
TORCH_NPU_API void free_device_work_memory(void* ptr);

} // namespace c10_npu::NPUCachingAllocator
