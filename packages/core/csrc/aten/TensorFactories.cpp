// Tensor creation, storage and view kernels of npu: what core must provide so
// that tensors can exist on npu at all. Everything numeric lives in the ops
// package.
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "npu/NPUCachingAllocator.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUStream.h"

namespace c10_npu::aten {
namespace {

constexpr c10::DispatchKeySet kNPUKeys(c10::DispatchKey::PrivateUse1);

c10::DeviceIndex target_device(std::optional<c10::Device> device) {
  const c10::DeviceIndex index =
      device.has_value() && device->has_index() ? device->index() : current_device();
  check_device_index(index); // "npu" with no device at all fails here, with its message
  return index;
}

void check_sizes(c10::IntArrayRef size) {
  for (const auto s : size) {
    TORCH_CHECK(
        s >= 0, "Trying to create an npu tensor with negative dimension ", s, ": ", size);
  }
}

// Note [Deterministic mode fills new npu memory]: under
// torch.use_deterministic_algorithms(True) with
// torch.utils.deterministic.fill_uninitialized_memory (its default), the
// CPU's and CUDA's empty* and resize_ fill the memory they hand out with NaN
// (floating and complex dtypes) or the dtype's largest value, so that reading
// it before writing it is reproducible. npu handed out whatever the caching
// allocator's block held.
bool fills_new_memory() {
  const auto& context = at::globalContext();
  return C10_UNLIKELY(context.deterministicAlgorithms() && context.deterministicFillUninitializedMemory());
}

at::Tensor filled_if_deterministic(at::Tensor t) {
  if (fills_new_memory()) {
    at::native::fill_empty_deterministic_(t);
  }
  return t;
}

at::Tensor empty_memory_format(
    c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout, std::optional<c10::Device> device,
    std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(
      !pin_memory.value_or(false), "Only CPU tensors can be pinned; npu tensors live in device memory.");
  TORCH_CHECK(
      layout.value_or(c10::Layout::Strided) == c10::Layout::Strided,
      "npu tensors support only the strided layout, got ", *layout);
  check_sizes(size);
  const NPUGuard guard(target_device(device));
  return filled_if_deterministic(at::detail::empty_generic(
      size, NPUCachingAllocator::get(), kNPUKeys,
      c10::dtype_or_default(dtype), memory_format));
}

at::Tensor empty_strided(
    c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout, std::optional<c10::Device> device,
    std::optional<bool> pin_memory) {
  TORCH_CHECK(
      !pin_memory.value_or(false), "Only CPU tensors can be pinned; npu tensors live in device memory.");
  check_sizes(size);
  const NPUGuard guard(target_device(device));
  return filled_if_deterministic(at::detail::empty_strided_generic(
      size, stride, NPUCachingAllocator::get(), kNPUKeys, c10::dtype_or_default(dtype)));
}

const at::Tensor& resize_(
    const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> memory_format) {
  check_sizes(size);
  auto* impl = self.unsafeGetTensorImpl();
  const NPUGuard guard(self.device());
  // As on the CPU, a tensor that has the sizes already keeps its strides
  // (an out= argument of the right shape keeps its layout).
  if (!impl->sizes().equals(size)) {
    impl->set_sizes_contiguous(size);
  }
  if (memory_format.has_value()) {
    TORCH_CHECK(
        *memory_format != c10::MemoryFormat::Preserve,
        "Unsupported memory format ", *memory_format, " for resize_");
    impl->empty_tensor_restride(*memory_format);
  }
  const size_t needed = at::detail::computeStorageNbytes(
      impl->sizes(), impl->strides(), impl->dtype().itemsize(),
      impl->storage_offset());
  const int64_t old_nbytes = static_cast<int64_t>(impl->storage().nbytes());
  if (needed > impl->storage().nbytes()) {
    at::native::resize_bytes_nocuda(impl->storage(), c10::SymInt(static_cast<int64_t>(needed)));
    if (fills_new_memory()) {
      // Note [Deterministic mode fills new npu memory]: the bytes the storage grew by.
      at::native::fill_resize_deterministic_(self, old_nbytes);
    }
  }
  return self;
}

at::Tensor& set_storage(
    at::Tensor& self, at::Storage source, int64_t storage_offset,
    c10::IntArrayRef size, c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  const std::optional<c10::IntArrayRef> strides =
      stride.data() != nullptr ? std::optional<c10::IntArrayRef>(stride) : std::nullopt;
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), size, strides, /*resize_storage=*/false);
  // As on CPU, a storage too small for the new geometry grows (if resizable).
  const size_t needed = self.numel() == 0
      ? 0
      : at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.dtype().itemsize(), storage_offset);
  if (needed > self.storage().nbytes()) {
    TORCH_CHECK(
        self.storage().resizable(), "set_: the storage of ", self.storage().nbytes(),
        " bytes is too small for size ", size, " at offset ", storage_offset, " and is not resizable");
    at::native::resize_bytes_nocuda(self.storage(), c10::SymInt(static_cast<int64_t>(needed)));
  }
  return self;
}

at::Tensor& set_empty(at::Tensor& self) {
  const NPUGuard guard(self.device());
  c10::Storage storage(
      c10::Storage::use_byte_size_t(), 0, NPUCachingAllocator::get(), /*resizable=*/true);
  return set_storage(self, storage, 0, {0}, {});
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Storage", TORCH_FN(at::native::set_));
  m.impl("set_.source_Tensor", TORCH_FN(at::native::set_tensor_));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
}

} // namespace c10_npu::aten
