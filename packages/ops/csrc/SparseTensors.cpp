#include "SparseTensors.h"

#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/resize_as_sparse_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "DeviceOpExecutor.h"
#include "IValueTensors.h"
#include "KernelInstallation.h"

namespace torch_npu_ops {

at::Tensor sparse_with_members(
    const at::Tensor& t, c10::Device device, const std::function<at::Tensor(const at::Tensor&)>& member) {
  TORCH_INTERNAL_ASSERT(device.is_cpu() || device.is_privateuseone() || device.is_meta());
  if (t.layout() == c10::kSparse) {
    const auto* impl = at::sparse::get_sparse_impl(t);
    return at::native::new_with_dims_and_tensor_sparse_symint(
        impl->sparse_dim(), impl->dense_dim(), t.sym_sizes(), member(impl->indices()), member(impl->values()),
        t.scalar_type(), c10::kSparse, device, std::nullopt, impl->coalesced());
  }
  const auto* impl = at::sparse_csr::get_sparse_csr_impl(t);
  const c10::DispatchKey key = device.is_cpu()
      ? c10::DispatchKey::SparseCsrCPU
      : (device.is_meta() ? c10::DispatchKey::SparseCsrMeta : c10::DispatchKey::SparseCsrPrivateUse1);
  auto out = c10::make_intrusive<at::SparseCsrTensorImpl>(c10::DispatchKeySet(key), device, t.layout(), t.dtype());
  out->set_member_tensors(
      member(impl->compressed_indices()), member(impl->plain_indices()), member(impl->values()), t.sym_sizes());
  return at::Tensor(std::move(out));
}

std::vector<at::Tensor> sparse_members(const at::Tensor& t) {
  TORCH_INTERNAL_ASSERT(is_sparse_layout(t));
  if (t.layout() == c10::kSparse) {
    const auto* impl = at::sparse::get_sparse_impl(t);
    return {impl->indices(), impl->values()};
  }
  const auto* impl = at::sparse_csr::get_sparse_csr_impl(t);
  return {impl->compressed_indices(), impl->plain_indices(), impl->values()};
}

c10::DispatchKeySet kernel_keys(const std::vector<c10::IValue>& args, c10::BackendComponent backend) {
  c10::DispatchKeySet functionality(c10::DispatchKey::Dense);
  const auto add = [&](const at::Tensor& t) {
    if (t.defined() && t.is_nested()) {
      functionality = functionality.add(c10::DispatchKey::NestedTensor);
    } else if (t.defined() && t.layout() == c10::kSparse) {
      functionality = functionality.add(c10::DispatchKey::Sparse);
    } else if (is_sparse_layout(t)) {
      functionality = functionality.add(c10::DispatchKey::SparseCsr);
    }
  };
  for (const auto& arg : args) {
    for_each_tensor(arg, add);
  }
  return functionality | c10::DispatchKeySet(backend);
}

void set_sparse_members(const at::Tensor& out, const at::Tensor& like) {
  TORCH_INTERNAL_ASSERT(out.layout() == like.layout());
  if (out.layout() == c10::kSparse) {
    const auto* source = at::sparse::get_sparse_impl(like);
    auto* impl = at::sparse::get_sparse_impl(out);
    impl->raw_resize_(source->sparse_dim(), source->dense_dim(), like.sizes());
    impl->set_indices_and_values_unsafe(source->indices(), source->values());
    impl->set_coalesced(source->coalesced());
    return;
  }
  const auto* source = at::sparse_csr::get_sparse_csr_impl(like);
  at::sparse_csr::get_sparse_csr_impl(out)->set_member_tensors(
      source->compressed_indices(), source->plain_indices(), source->values(), like.sym_sizes());
}

namespace {

// An empty compressed npu tensor: PyTorch's generic constructor knows only
// the CPU, CUDA and Meta dispatch keys.
at::Tensor empty_sparse_compressed_npu(
    c10::SymIntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
    std::optional<at::Device> device, std::optional<bool> pin_memory,
    std::optional<at::MemoryFormat> memory_format) {
  // The CPU's constructor checks the arguments and shapes the members; the
  // members are then made again on npu.
  const at::Tensor host = at::native::empty_sparse_compressed_symint(
      size, dtype, layout, c10::Device(c10::DeviceType::CPU), pin_memory, memory_format);
  const c10::Device npu = device.value_or(c10::Device(c10::DeviceType::PrivateUse1));
  return sparse_with_members(host, npu, [&](const at::Tensor& m) {
    return at::empty(m.sizes(), m.options().device(npu));
  });
}

} // namespace

// The structure of sparse npu tensors: PyTorch's device-generic kernels (the
// ones it registers for the Meta device too), which only arrange member
// tensors and leave any computation on them to npu's dense kernels.
TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_symint));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_sparse_coo));
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
  m.impl("sparse_resize_and_clear_", TORCH_FN(at::native::sparse_resize_and_clear_));
  m.impl("resize_as_sparse_", TORCH_FN(at::native::resize_as_sparse_));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_dimI", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("_dimV", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("clone", TORCH_FN(at::native::clone_sparse));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_wrapper_));
  m.impl("copy_sparse_to_sparse_", TORCH_FN(at::native::copy_sparse_));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_));
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_sparse_compressed_npu));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_sparse_csr));
  m.impl("resize_", TORCH_FN(at::native::resize_sparse_csr_));
  m.impl("resize_as_sparse_", TORCH_FN(at::native::resize_as_sparse_compressed_));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse_csr));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse_csr));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse_csr));
  m.impl("values", TORCH_FN(at::native::values_sparse_csr));
  m.impl("crow_indices", TORCH_FN(at::native::crow_indices_sparse_csr));
  m.impl("col_indices", TORCH_FN(at::native::col_indices_sparse_csr));
  m.impl("ccol_indices", TORCH_FN(at::native::ccol_indices_sparse_csr));
  m.impl("row_indices", TORCH_FN(at::native::row_indices_sparse_csr));
  m.impl("clone", TORCH_FN(at::native::clone_sparse_compressed));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_compressed_));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_csr_));
}

void install_sparse_kernels() {
  // An op the CPU computes with a sparse kernel of its own computes with it
  // on npu too.
  static std::once_flag once;
  std::call_once(once, [] {
    const auto register_op = [](torch::Library& library, const char* op_name) {
      library.impl(op_name, torch::CppFunction::makeFromBoxedFunction<&run_sparse_on_npu>());
    };
    register_where_the_cpu_has_a_kernel(c10::DispatchKey::SparseCPU, c10::DispatchKey::SparsePrivateUse1, register_op);
    register_where_the_cpu_has_a_kernel(
        c10::DispatchKey::SparseCsrCPU, c10::DispatchKey::SparseCsrPrivateUse1, register_op);
  });
}

// Ops that the CPU has no sparse kernel for (and no composite one covers)
// reach these fallbacks, which try the same: the CPU kernel then says
// whether it supports the layout. The number of specified elements of a
// sparse result is known only once the kernel ran, so the host waits.
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&run_sparse_on_npu>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&run_sparse_on_npu>());
}

} // namespace torch_npu_ops
