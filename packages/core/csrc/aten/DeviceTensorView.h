// Describing npu tensors to device work.
//
// Device work must not hold at::Tensor references (memory reuse is
// stream-ordered, as on CUDA), so a kernel captures a TensorDesc: the data
// pointer, sizes, strides and dtype. Inside the work, cpu_view() wraps the
// memory, reached through the simulator's host-access offset, as a CPU
// tensor without copying, so PyTorch's own CPU kernels run on device memory.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include "npu/Macros.h"

namespace c10_npu::aten {

struct TORCH_NPU_API TensorDesc {
  explicit TensorDesc(const at::Tensor& tensor);

  // Only inside device work.
  at::Tensor cpu_view() const;

  void* data; // device address of the first element
  c10::SmallVector<int64_t, 6> sizes;
  c10::SmallVector<int64_t, 6> strides;
  c10::ScalarType dtype;
};

} // namespace c10_npu::aten
