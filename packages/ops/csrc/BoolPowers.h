// Powers of bool tensors by a bool exponent, whose meta kernel's dtype is
// not the CPU kernel's.
//
// Note [Powers of bools by a bool stay bool]
// The CPU's pow(bool_tensor, True) gives a bool tensor (the result type of
// a bool tensor and a bool scalar); the Python meta kernel torch registers
// for pow.Tensor_Scalar (torch._refs.pow, which promotes bool to int64)
// gives int64. npu's pow has a kernel of its own, but _foreach_pow's
// .Scalar and .ScalarList overloads run through the executor, which shapes
// their outputs with that meta kernel (Note [Meta kernels shape the CPU
// kernel's outputs]): once the Python meta kernels were active,
// torch._foreach_pow([bool_tensor], True) returned int64 on npu where the
// CPU returns bool. The executor gives such results the CPU's dtype.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include "OutputShapes.h"

namespace torch_npu_ops {

// Sets the dtype of each result of `_foreach_pow` (.Scalar, .ScalarList)
// whose tensor is bool and whose exponent is a bool to bool in `spec`, the
// outputs the meta kernel gave for `args`.
void keep_bool_powers_bool(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                           OutputSpec& spec);

} // namespace torch_npu_ops
