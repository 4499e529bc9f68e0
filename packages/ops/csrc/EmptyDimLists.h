// Reductions whose CPU kernel reads an empty dim list as "every dim".
//
// Note [An empty dim list reduces every dim]
// nansum's CPU kernel reduces every dimension when dim=[] is passed (the
// legacy reading of an empty list that sum also keeps); its Python meta
// kernel (torch._refs) reads it as "no dimension" and gives the input's
// shape. The executor shapes outputs with the meta kernel (Note [Meta
// kernels shape the CPU kernel's outputs]), so once the Python meta kernels
// were active, torch.nansum(x, dim=[]) on npu returned a tensor of x's shape
// filled with the total instead of a 0-d total (nanmean, which is composed
// of nansum, likewise). The meta kernel of these ops gets dim=None for an
// empty list, which is what the CPU kernel computes.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

namespace torch_npu_ops {

// Replaces an empty `dim` list in `stack`, the meta kernel's arguments for
// `schema`, with None, for the ops of Note [An empty dim list reduces every
// dim].
void empty_dim_list_as_every_dim(const c10::FunctionSchema& schema, torch::jit::Stack& stack);

} // namespace torch_npu_ops
