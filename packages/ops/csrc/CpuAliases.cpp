#include "CpuAliases.h"

#include <ATen/ops/as_strided.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include "NestedTensors.h"
#include "SparseTensors.h"
#include "npu/NPUWork.h"

namespace torch_npu_ops {

void keep_requires_grad(at::Tensor& alias, const at::Tensor& t) {
  if (t.requires_grad()) {
    alias.set_requires_grad(true);
  }
}

at::Tensor cpu_alias(const at::Tensor& t) {
  if (!t.defined()) {
    return t;
  }
  if (is_sparse_layout(t)) {
    at::Tensor alias = sparse_with_members(t, c10::Device(c10::DeviceType::CPU), &cpu_alias);
    keep_requires_grad(alias, t);
    return alias;
  }
  if (t.is_nested()) {
    // Note [Nested npu tensors].
    at::Tensor alias = nested_with_buffer(t, &cpu_alias);
    keep_requires_grad(alias, t);
    return alias;
  }
  const auto options = t.options().device(c10::DeviceType::CPU);
  at::Tensor alias = t.data_ptr() == nullptr
      ? at::empty_strided(t.sizes(), t.strides(), options)
      : at::from_blob(c10_npu::host_access(t.data_ptr()), t.sizes(), t.strides(), options);
  // Ops that handle the conjugate and negative bits themselves (mm, dot,
  // views, ...) receive tensors with the bits: the CPU kernel must see them.
  alias._set_conj(t.is_conj());
  alias._set_neg(t.is_neg());
  keep_requires_grad(alias, t);
  return alias;
}

std::vector<at::Tensor> cpu_aliases(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) {
    out.push_back(cpu_alias(t));
  }
  return out;
}

at::Tensor view_of(const at::Tensor& base, const TensorSpec& spec) {
  if (spec.dtype == base.scalar_type()) {
    return at::as_strided(base, spec.sizes, spec.strides, base.storage_offset() + spec.storage_offset);
  }
  const int64_t itemsize = static_cast<int64_t>(c10::elementSize(spec.dtype));
  const int64_t offset_bytes = base.storage_offset() * base.element_size() + spec.storage_offset * itemsize;
  TORCH_CHECK(
      offset_bytes % itemsize == 0, "a view of dtype ", spec.dtype, " needs a storage offset that is a multiple of ",
      itemsize, " bytes, got ", offset_bytes, " bytes");
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::TensorImpl::VIEW, c10::Storage(base.storage()), base.key_set(), c10::scalarTypeToTypeMeta(spec.dtype));
  impl->set_sizes_and_strides(spec.sizes, spec.strides, offset_bytes / itemsize);
  return at::Tensor(std::move(impl));
}

void keep_math_bits(const at::Tensor& out, bool conj, bool neg) {
  if (out.is_conj() != conj) {
    out._set_conj(conj);
    out.conj_physical_();
  }
  if (out.is_neg() != neg) {
    out._set_neg(neg);
    out.neg_();
  }
}

void keep_geometry(const at::Tensor& out, void* data, c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  if (out.sizes().equals(sizes) && out.strides().equals(strides) && out.data_ptr() == data) {
    return;
  }
  TORCH_CHECK(
      out.sizes().equals(sizes), "the CPU kernel resized its output from ", sizes, " to ", out.sizes());
  if (out.numel() == 0) {
    return;
  }
  const at::Tensor values = out.clone();
  at::from_blob(data, sizes, strides, out.options()).copy_(values);
}

at::Tensor DeviceGeometry::view() const {
  return at::from_blob(data, sizes, strides, at::TensorOptions().dtype(dtype).device(c10::DeviceType::CPU));
}

std::vector<DeviceGeometry> geometries(const std::vector<at::Tensor>& views) {
  std::vector<DeviceGeometry> out;
  out.reserve(views.size());
  for (const auto& v : views) {
    out.emplace_back(v);
  }
  return out;
}

std::vector<std::pair<size_t, DeviceGeometry>> out_argument_geometry(
    const c10::FunctionSchema& schema, const std::vector<c10::IValue>& cpu_args) {
  std::vector<std::pair<size_t, DeviceGeometry>> out;
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size() && i < cpu_args.size(); ++i) {
    if (arguments[i].is_out() && cpu_args[i].isTensor() && cpu_args[i].toTensor().defined()) {
      out.emplace_back(i, DeviceGeometry(cpu_args[i].toTensor()));
    }
  }
  return out;
}

} // namespace torch_npu_ops
