// Ops whose meta kernel lays a result out otherwise than their CPU kernel.
//
// Note [Results laid out as the CPU kernel lays them out]
// The executor allocates an op's outputs as its meta kernel shapes them
// (Note [Meta kernels shape the CPU kernel's outputs]). For a few ops the
// meta kernel's strides are not the CPU kernel's, whatever device_hint says:
// - channel_shuffle and native_channel_shuffle: the CPU kernel writes its
//   result in the input's suggested memory order (channels-last in,
//   channels-last out); their meta kernels give a contiguous result;
// - max_unpool2d: likewise for a batched (4-d) input;
// - max_pool3d_with_indices of an unbatched (4-d) input that is
//   channels-last-3d once unsqueezed (a channels-last-3d batch of one,
//   squeezed): the CPU kernel pools it with a batch of one and returns
//   results in that order; the Python meta kernel makes them contiguous;
// - log_sigmoid_forward (output and buffer) and rrelu_with_noise: the CPU
//   kernels make contiguous results; the Python meta kernels keep the
//   input's strides (F.logsigmoid and F.rrelu of a transposed tensor).
// - copysign.Tensor and floor_divide of a tensor by a 0-dim tensor: the
//   Python meta kernels (torch._refs) make the result contiguous where the
//   CPU's TensorIterator follows the other input's order (a transposed
//   tensor by an npu scalar tensor); the result takes TensorIterator's
//   strides.
// npu results took the meta kernel's strides once the meta kernels were
// active, and the CPU kernel's before (ops run synchronously during the
// warm-up take the CPU result's geometry): the same call returned another
// layout depending on when it ran. The executor gives these results the
// CPU kernel's layout.
#pragma once

#include <vector>

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include "OutputShapes.h"

namespace torch_npu_ops {

// Restrides the results in `spec`, the outputs the meta kernel gave for
// `args`, as the CPU kernel of `schema`'s op lays them out.
void lay_out_as_the_cpu_kernel(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                               OutputSpec& spec);

} // namespace torch_npu_ops
