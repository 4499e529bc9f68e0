// The generic npu kernel: runs any ATen op that has a CPU kernel as device
// work on npu memory.
//
// 1. The op's meta kernel gives the outputs' sizes, strides and dtypes
//    (or, for ops whose result depends on the data, nothing);
// 2. outputs are allocated by the npu caching allocator on the op's device;
// 3. the CPU kernel is enqueued on the current stream and runs on the
//    stream's worker, directly on device memory (npu tensors are wrapped as
//    CPU tensors over the simulator's host-access alias), writing into the
//    npu outputs. The host returns once the work is queued.
// Data-dependent ops (and ops without a meta kernel) run the same way but
// the host waits for the result.
//
// run_on_npu (DeviceOpExecutor.cpp) plans a call (ExecutionPlan.h: which
// path it takes), allocates its outputs and launches its work item
// (AsyncKernelWork.h). Its parts: CPU aliases of npu tensors (CpuAliases.h),
// the CPU kernel's arguments (KernelArguments.h), the path on which the host
// waits (SynchronousExecution.h), sparse ops (SparseExecution.cpp) and nested
// ones (NestedExecution.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace torch_npu_ops {

// The boxed kernel installed as core's missing-kernel handler.
void run_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The boxed fallback of the sparse npu dispatch keys: the op's sparse CPU
// kernel runs as device work on the members' device memory, and the host
// waits for it (a sparse result's size depends on the data).
void run_sparse_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The kernel of the nested npu dispatch key: the op's nested CPU kernel runs
// as device work on the buffers' device memory, and the host waits for it
// (Note [Nested npu tensors], NestedTensors.h).
void run_nested_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack);

} // namespace torch_npu_ops
