#include "DeviceArgument.h"

#include <algorithm>
#include <cstring>

#include <ATen/EmptyTensor.h>
#include <c10/core/TensorImpl.h>

#include "npu/NPUWork.h"

namespace torch_npu_ops {

DeviceTensorArg::DeviceTensorArg(const at::Tensor& t) {
  if (!t.defined()) {
    return;
  }
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  dtype_ = impl->dtype().toScalarType();
  if (impl->device_type() == c10::DeviceType::CPU) {
    // Only 0-dim host tensors reach here (see FastPath.h): their value is
    // copied now, since the host may change the tensor before the work runs.
    kind_ = Kind::HostScalar;
    wrapped_number_ = impl->is_wrapped_number();
    std::memcpy(inline_, t.const_data_ptr(), impl->itemsize());
    return;
  }
  kind_ = Kind::Device;
  const int64_t dim = impl->dim();
  TORCH_CHECK(dim <= 127, "device work supports at most 127 dimensions, got ", dim);
  dim_ = static_cast<int8_t>(dim);
  data_ = impl->numel() == 0 ? nullptr : t.data_ptr();
  int64_t* geometry = inline_;
  if (dim > kInlineDims) {
    heap_geometry_ = std::make_unique<int64_t[]>(2 * dim);
    geometry = heap_geometry_.get();
  }
  const auto sizes = impl->sizes();
  const auto strides = impl->strides();
  std::copy(sizes.begin(), sizes.end(), geometry);
  std::copy(strides.begin(), strides.end(), geometry + dim);
}

at::Tensor DeviceTensorArg::materialize() const {
  if (kind_ == Kind::Undefined) {
    return at::Tensor();
  }
  // A non-owning CPU storage over the memory, built directly rather than
  // with at::from_blob: this runs once per argument of every queued op.
  const auto dtype = c10::scalarTypeToTypeMeta(dtype_);
  const c10::Device cpu(c10::DeviceType::CPU);
  if (kind_ == Kind::HostScalar) {
    c10::Storage storage(
        c10::Storage::use_byte_size_t(), dtype.itemsize(),
        c10::DataPtr(const_cast<int64_t*>(inline_), cpu), nullptr, false);
    auto t = at::detail::make_tensor<c10::TensorImpl>(
        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), dtype);
    t.unsafeGetTensorImpl()->set_sizes_and_strides(c10::IntArrayRef(), c10::IntArrayRef()); // fresh: 1-dim
    // Type promotion treats wrapped Python numbers differently from 0-dim
    // tensors: keep the flag.
    t.unsafeGetTensorImpl()->set_wrapped_number(wrapped_number_);
    return t;
  }
  void* data = data_ == nullptr ? nullptr : c10_npu::host_access(data_);
  const c10::IntArrayRef sizes(geometry(), dim_);
  const c10::IntArrayRef strides(geometry() + dim_, dim_);
  const size_t nbytes = at::detail::computeStorageNbytes(sizes, strides, dtype.itemsize());
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, c10::DataPtr(data, cpu), nullptr, false);
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), dtype);
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
  return t;
}

} // namespace torch_npu_ops
