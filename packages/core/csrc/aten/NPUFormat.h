// The storage format of npu tensors (torch_npu.get_npu_format /
// npu_format_cast).
//
// Ascend NPUs keep some tensors in private memory layouts ("formats":
// FRACTAL_NZ for matmul operands, NC1HWC0 for convolutions, ...). Code
// written for Ascend's torch_npu casts tensors between formats and reads
// the format back. Here the values of every npu tensor stay in PyTorch's
// strided layout; the format is metadata of the tensor (its BackendMeta),
// which get_npu_format reports, tensor shallow copies (param.data = ...)
// keep, and torch.save / torch.load round-trip. A tensor that was never
// cast has its base format: NCHW for 4-d tensors, NCDHW for 5-d ones, ND
// otherwise, as on CANN.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "npu/Macros.h"

namespace c10_npu {

// (name, aclFormat value) of every format, in value order.
TORCH_NPU_API const std::vector<std::pair<std::string, int64_t>>& npu_formats();

// The format of npu tensor `t` (its base format unless cast).
TORCH_NPU_API int64_t get_npu_format(const at::Tensor& t);

// Tags npu tensor `t` with `format`, after checking that the format exists
// and suits t's number of dimensions (a clear error otherwise).
TORCH_NPU_API void set_npu_format(const at::Tensor& t, int64_t format);

} // namespace c10_npu
