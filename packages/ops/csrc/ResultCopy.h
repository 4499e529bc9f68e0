// Copying a CPU kernel's result into the npu output, inside device work.
//
// Ops without an out= form (convolution, embedding, ...) let their CPU
// kernel allocate the result, which the work then copies into the output the
// host already handed out, unless the result was placed there
// (ResultPlacement.h). For large results that copy is a visible share of the
// op (a conv2d's 6 MiB output: ~10%).
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_npu_ops {

// dst.copy_(src), where `dst` views device memory. A contiguous copy of one
// dtype is a memcpy; a large one is split across the intra-op threads and,
// on x86-64, uses non-temporal stores: the output is not read again by this
// work, so writing around the caches saves the read of every destination
// line (about a third of the memory traffic).
void copy_result(const at::Tensor& dst, const at::Tensor& src);

} // namespace torch_npu_ops
