// Finding the out= overload of a functional op.
//
// Running a functional CPU kernel on device work would allocate its result
// in host memory and then copy it into the npu output: twice the memory
// traffic. The out= overload writes straight into the npu output instead.
#pragma once

#include <optional>

#include <ATen/core/dispatch/Dispatcher.h>

namespace torch_npu_ops {

// The overload of `op` that takes the same arguments followed by one
// `Tensor(a!) out` per return, if `op` is functional and has one with a CPU
// kernel.
std::optional<c10::OperatorHandle> out_variant(const c10::OperatorHandle& op);

// Stops out_variant from offering an out= overload for `op` (its out= kernel
// cannot write into fixed-size device outputs).
void deny_out_variant(const c10::OperatorHandle& op);

} // namespace torch_npu_ops
