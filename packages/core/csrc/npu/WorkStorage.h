// Memory for work items (launch_recycled_work in NPUWork.h).
//
// Every queued op allocates its work item on the host thread and the
// stream's worker frees it. glibc's malloc serves that producer/consumer
// pattern badly: the worker's frees fill its own per-thread cache and then
// go back to the host's arena under the arena lock, while the host's
// allocations miss its cache and take that lock too, for every op. Work items
// of up to kWorkBlockSize bytes are therefore recycled: the worker returns
// blocks in batches to a lock-free list that the host takes in one exchange
// (once per batch, not per op: each exchange and each block header the
// worker wrote costs the host a cache line from the worker's core).
#pragma once

#include <cstddef>

#include "npu/Macros.h"

namespace c10_npu {

constexpr size_t kWorkBlockSize = 1024;

// Memory for an object of `size` bytes (aligned for any fundamental type).
TORCH_NPU_API void* allocate_work_storage(size_t size);

// Gives back memory from allocate_work_storage(size); any thread.
TORCH_NPU_API void release_work_storage(void* storage, size_t size) noexcept;

} // namespace c10_npu
