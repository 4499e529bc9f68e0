#include "NestedTensors.h"

#include <ATen/NestedTensorImpl.h>
#include <ATen/ops/_nested_view_from_buffer_native.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/empty_like_native.h>
#include <torch/library.h>

#include <mutex>

#include "DeviceOpExecutor.h"
#include "KernelInstallation.h"

namespace torch_npu_ops {

at::Tensor nested_buffer(const at::Tensor& t) {
  return at::native::get_nested_tensor_impl(t)->get_unsafe_storage_as_tensor();
}

at::Tensor nested_with_buffer(const at::Tensor& t, const std::function<at::Tensor(const at::Tensor&)>& buffer) {
  const auto* impl = at::native::get_nested_tensor_impl(t);
  return at::detail::make_tensor<at::native::NestedTensorImpl>(
      buffer(impl->get_unsafe_storage_as_tensor()), impl->get_nested_sizes(), impl->get_nested_strides(),
      impl->get_storage_offsets());
}

at::Tensor nested_with_host_metadata(const at::Tensor& t) {
  const auto* impl = at::native::get_nested_tensor_impl(t);
  return at::detail::make_tensor<at::native::NestedTensorImpl>(
      impl->get_unsafe_storage_as_tensor(), impl->get_nested_sizes().clone(), impl->get_nested_strides().clone(),
      impl->get_storage_offsets().clone());
}

void install_nested_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_where_the_cpu_has_a_kernel(
        c10::DispatchKey::NestedTensorCPU, c10::DispatchKey::NestedTensorPrivateUse1,
        [](torch::Library& library, const char* op_name) {
          library.impl(op_name, torch::CppFunction::makeFromBoxedFunction<&run_nested_on_npu>());
        });
  });
}

// The structure of nested npu tensors: PyTorch's device-generic kernels,
// which make nested tensors over buffers of any device and leave the copying
// of values to npu's dense kernels (Tensor.cpu(), .to("npu")).
TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("empty_like", TORCH_FN(at::native::empty_like_nested));
  m.impl("_to_copy", TORCH_FN(at::native::_to_copy_nested));
}

// A nested view of a dense npu buffer (Tensor.values()' backward makes one):
// metadata over that buffer, which the CPU's kernel makes on any device. As
// device work it would be a copy.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_nested_view_from_buffer", TORCH_FN(at::native::_nested_view_from_buffer));
}

} // namespace torch_npu_ops
