// Results the CPU kernel returns undefined, where the meta kernel gives a
// tensor: the executor leaves them undefined too.
//
// Note [Results the CPU kernel leaves undefined]
// _native_multi_head_attention with need_weights=False returns an undefined
// attention-weights tensor on the CPU (None in Python), and so does
// nn.MultiheadAttention's fast path built on it. torch's Python meta kernel
// for it returns an empty tensor there instead (query.new_empty(0)). The
// op has no C++ meta kernel, so npu ran it synchronously and returned the
// CPU's None only until the Python meta kernels were ready (the background
// warm-up of Note [Python meta kernels and the first op], or an import of
// torch._dynamo): from then on the executor shaped its outputs with that
// meta kernel (Note [Meta kernels shape the CPU kernel's outputs]) and
// returned tensor([]) where the CPU returns None, e.g. from an eval-mode
// nn.MultiheadAttention(batch_first=True)(x, x, x, need_weights=False).
// Likewise native_batch_norm_backward and batch_norm_backward: their meta
// kernel gives grad_input whatever output_mask says, where the CPU kernel
// returns undefined results for the masked-out gradients. The executor
// leaves such results undefined, as the CPU kernel does.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include "OutputShapes.h"

namespace torch_npu_ops {

// Marks undefined, in `spec` (the outputs the meta kernel gave for `args`),
// the results the CPU kernel of `schema` returns undefined for `args`.
void leave_undefined_as_the_cpu_kernel(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                                       OutputSpec& spec);

} // namespace torch_npu_ops
