#include "aten/DeviceTensorView.h"

#include <ATen/ops/from_blob.h>

#include "npu/NPUWork.h"

namespace c10_npu::aten {

TensorDesc::TensorDesc(const at::Tensor& tensor)
    : data(tensor.data_ptr()),
      sizes(tensor.sizes().begin(), tensor.sizes().end()),
      strides(tensor.strides().begin(), tensor.strides().end()),
      dtype(tensor.scalar_type()) {}

at::Tensor TensorDesc::cpu_view() const {
  return at::from_blob(
      host_access(data), sizes, strides,
      at::TensorOptions().dtype(dtype).device(c10::DeviceType::CPU));
}

} // namespace c10_npu::aten
