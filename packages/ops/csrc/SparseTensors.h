// Sparse npu tensors: COO (torch.sparse_coo) and the compressed layouts
// (torch.sparse_csr, sparse_csc, sparse_bsr, sparse_bsc).
//
// A sparse npu tensor is PyTorch's own sparse tensor impl whose member
// tensors (indices and values) are dense npu tensors. Its structure (sizes,
// nnz, members, resizing) is handled by PyTorch's device-generic sparse
// kernels, registered for npu in SparseTensors.cpp; its ops run the sparse
// CPU kernels as device work (DeviceOpExecutor.h), which see it through
// `sparse_with_members`: the same tensor with its members as CPU aliases.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <vector>

namespace torch_npu_ops {

inline bool is_sparse_layout(const at::Tensor& t) {
  return t.defined() && t.layout() != c10::kStrided;
}

// A sparse tensor of `t`'s layout, sizes, dtype and (for COO) coalesced
// flag, on `device`, whose member tensors are `member(m)` for each member m
// of `t`. Reads no values: safe on the host for members that alias device
// memory.
at::Tensor sparse_with_members(
    const at::Tensor& t, c10::Device device, const std::function<at::Tensor(const at::Tensor&)>& member);

// The member tensors (indices and values) of the sparse tensor `t`.
std::vector<at::Tensor> sparse_members(const at::Tensor& t);

// The dispatch keys of `backend`'s kernel for arguments like `args`: its
// dense key, plus its sparse (or nested) ones where sparse (or nested)
// tensors are among them (the dispatcher then picks that kernel, as it does
// for the npu op).
c10::DispatchKeySet kernel_keys(const std::vector<c10::IValue>& args, c10::BackendComponent backend);

// Makes the sparse tensor `out` take the size and members of `like`, a
// sparse tensor of the same layout and device.
void set_sparse_members(const at::Tensor& out, const at::Tensor& like);

// Registers the sparse npu kernel (DeviceOpExecutor.h's run_sparse_on_npu)
// for every op with a sparse CPU kernel. Once, after the ops are loaded.
void install_sparse_kernels();

} // namespace torch_npu_ops
