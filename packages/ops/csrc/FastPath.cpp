#include "FastPath.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_native.h>

#include "npu/NPUCachingAllocator.h"
#include "npu/NPUFunctions.h"

namespace torch_npu_ops::fast {

at::Tensor allocate_output(c10::IntArrayRef sizes, c10::IntArrayRef strides, const c10::TensorOptions& options) {
  constexpr c10::DispatchKeySet kNPUKeys(c10::DispatchKey::PrivateUse1);
  TORCH_INTERNAL_ASSERT_DEBUG_ONLY(options.device().index() == c10_npu::current_device());
  const auto dtype = options.dtype().toScalarType();
  if (strides.empty()) {
    return at::detail::empty_generic(
        sizes, c10_npu::NPUCachingAllocator::get(), kNPUKeys, dtype, options.memory_format_opt());
  }
  return at::detail::empty_strided_generic(sizes, strides, c10_npu::NPUCachingAllocator::get(), kNPUKeys, dtype);
}

void resize_out(const at::Tensor& out, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                const c10::TensorOptions& options) {
  TORCH_CHECK(options.dtype() == out.dtype(), "Expected out tensor to have dtype ", options.dtype(),
              ", but got ", out.dtype(), " instead");
  TORCH_CHECK(options.device() == out.device(), "Expected out tensor to have device ", options.device(),
              ", but got ", out.device(), " instead");
  const bool resized = at::native::resize_output(out, sizes);
  // Only restride if a resize occurred; otherwise the meta function's strides
  // are advisory and the argument keeps its own (as on the CPU).
  if (resized) {
    if (!strides.empty()) {
      TORCH_INTERNAL_ASSERT(!options.memory_format_opt().has_value());
      at::native::as_strided__symint(out, c10::fromIntArrayRefSlow(sizes), c10::fromIntArrayRefSlow(strides));
    } else if (options.memory_format_opt().has_value()) {
      out.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
    }
  }
}

void check_inplace(const at::Tensor& self, c10::IntArrayRef sizes, const c10::TensorOptions& options) {
  TORCH_CHECK(options.dtype() == self.dtype(), "Bad in-place call: input tensor dtype ", self.dtype(),
              " and output tensor dtype ", options.dtype(), " should match");
  TORCH_CHECK(options.device() == self.device(), "Bad in-place call: input tensor device ", self.device(),
              " and output tensor device ", options.device(), " should match");
  TORCH_CHECK(sizes == self.sizes(), "Bad in-place call: input tensor size ", self.sizes(),
              " and output tensor size ", sizes, " should match");
}

} // namespace torch_npu_ops::fast
