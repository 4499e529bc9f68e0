// The caching allocator of pinned (page-locked) host memory, used by
// tensor.pin_memory() and for truly asynchronous copies. Built on ATen's
// CachingHostAllocatorImpl: blocks are reused once events recorded on the
// streams that used them have completed. Stats: torch.npu.host_memory_stats.
#pragma once

#include <ATen/core/CachingHostAllocator.h>

#include "npu/Macros.h"
#include "npu/NPUStream.h"

namespace c10_npu::NPUHostAllocator {

TORCH_NPU_API at::HostAllocator* get();

// Marks the pinned block holding `ptr` (with context `ctx`) as used by
// `stream`, so it is not reused before the stream's current work is done.
TORCH_NPU_API bool record_event(void* ptr, void* ctx, const NPUStream& stream);

// True if `ptr` points into pinned memory of the NPU runtime (interior
// pointers included).
TORCH_NPU_API bool is_pinned_ptr(const void* ptr);

} // namespace c10_npu::NPUHostAllocator
