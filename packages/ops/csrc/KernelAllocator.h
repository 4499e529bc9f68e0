// Where the CPU allocations of a CPU kernel running as device work go.
//
// A CPU kernel running as device work allocates its temporaries and its
// results through the CPU allocator. On a device those are device memory:
// inside a KernelAllocationScope they come from the npu caching allocator's
// device-work memory (NPUCachingAllocator.h), so they count in the device's
// memory statistics and capacity (torch.npu.max_memory_allocated,
// torch.OutOfMemoryError) as a real device's kernels' workspaces do. A scope
// may also have a lender (ResultPlacement.h) that gives chosen allocations
// the memory of an npu output instead.
//
// The CPU allocator is wrapped once, at import (install_kernel_allocator);
// the wrapper forwards everything to the allocator it wraps unless the
// allocating thread is inside a scope. Allocations made on other threads
// (a kernel's intra-op threads) stay host memory.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>

namespace torch_npu_ops {

// Wraps the CPU allocator. Call once, at import, before any device work.
void install_kernel_allocator();

// Sees every allocation of a scope, in order, and may serve it.
class KernelAllocationLender {
 public:
  virtual ~KernelAllocationLender() = default;
  // The `index`-th allocation of the scope asks for `bytes`: memory to use
  // instead of device-work memory (null data: none). Lent memory is given
  // back through give_back_lent (the returned DataPtr's deleter).
  virtual c10::DataPtr lend(int64_t index, size_t bytes) = 0;
  // The allocation that was not lent, at `data`.
  virtual void allocated(int64_t index, size_t bytes, void* data) = 0;
};

// The CPU allocations of this thread come from device-work memory while the
// scope lives (scopes nest): memory of the device whose stream's work this
// thread is running, asked at the first allocation, so that kernels that
// allocate nothing pay nothing.
class KernelAllocationScope {
 public:
  KernelAllocationScope();
  ~KernelAllocationScope();
  KernelAllocationScope(const KernelAllocationScope&) = delete;
  KernelAllocationScope& operator=(const KernelAllocationScope&) = delete;

  void set_lender(KernelAllocationLender* lender) { lender_ = lender; }
  // Ends the scope early: later allocations of this thread are host memory.
  void end();

  c10::DataPtr allocate(size_t bytes);

 private:
  c10::DeviceIndex device_ = -1; // resolved at the first allocation
  KernelAllocationLender* lender_ = nullptr;
  KernelAllocationScope* previous_;
  int64_t next_index_ = 0;
  bool active_ = true;
};

// A DataPtr over `data` (memory of an npu output, host-access address) whose
// deleter reports to `released` instead of freeing anything. The flag is
// read and reset under the lent-memory lock (lent_released).
c10::DataPtr lend_memory(void* data, bool* released);
// Forgets lent memory (its scope ended); true if it was given back.
bool forget_lent(void* data);

// Whether `t`'s storage is device-work memory (host code must not read it).
bool in_device_work_memory(const at::Tensor& t);

} // namespace torch_npu_ops
