// Which out= tensors keep their own geometry although the meta kernel
// reshapes them.
//
// Note [Range factories keep an out of the right size]
// The CPU kernels of arange, range, linspace and logspace resize their out=
// tensor only when its element count differs from the result's (ATen's
// RangeFactories.cpp): an out with the right count keeps its shape and
// strides, a non-contiguous view included, and is written in its own
// element order. Their Python meta kernels (torch._refs, through
// out_wrapper) resize every out whose shape differs. The executor sizes out=
// arguments with the meta kernel (Note [Meta kernels shape the CPU kernel's
// outputs]), so once the Python meta kernels were active (Note [Python meta
// kernels and the first op]), torch.arange(0, 4, out=x.narrow(1, 1, 2))
// turned the 2x2 view into 4 contiguous elements from its offset and the
// kernel wrote elements of x outside the view. For these ops an out of the
// right element count is left as it is. One with another count, and elements,
// the CPU kernel resizes to the result's length with its own warning
// (arange's "The out tensor will be resized"), where resize_output would
// give the generic deprecation warning instead: that call runs synchronously
// (run_sync), so the CPU kernel resizes it as it would on the CPU. The meta
// kernel itself sees every out= argument empty: it then only gives the
// result's shape, without the deprecation warning of out_wrapper (a Python
// warning, which the executor's DropWarnings does not catch) that the CPU
// kernel does not give.
#pragma once

#include <vector>

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>

#include "OutputShapes.h"

namespace torch_npu_ops {

// True if `schema` is an overload of an op whose CPU kernel leaves an out=
// tensor with as many elements as the result unresized.
bool keeps_out_of_result_numel(const c10::FunctionSchema& schema);

// True if a call of such an op passes an out= tensor that has elements, but
// not as many as the result (`spec`, from the meta kernel).
bool resizes_a_filled_range_out(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                                const OutputSpec& spec);

// Replaces the out= tensors of `stack`, the meta kernel's arguments for
// `schema`, with empty tensors of their dtype and device.
void empty_out_arguments(const c10::FunctionSchema& schema, torch::jit::Stack& stack);

} // namespace torch_npu_ops
