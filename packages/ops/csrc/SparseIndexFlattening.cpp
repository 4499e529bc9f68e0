// at::sparse::flatten_indices (NOTE [ Flatten Sparse Indices ] in PyTorch:
// each column of a COO tensor's indices as one offset into its sparse
// dimensions) goes through flatten_indices_stub, which has CPU and CUDA
// entries only. PyTorch calls it while it checks a COO tensor's invariants
// (torch.sparse_coo_tensor(..., check_invariants=True), or when
// torch.sparse.check_sparse_tensor_invariants is on, as in PyTorch's own
// TestCase): every such check of an npu tensor failed with "DispatchStub:
// missing kernel for npu". npu's entry computes the offsets with dense ops.
#include <ATen/ATen.h>
#include <ATen/native/DispatchStub.h>

#include <vector>

namespace at::native {
// PyTorch's declaration (ATen/native/sparse/FlattenIndicesCommon.h, not an
// installed header); the stub itself is exported by libtorch_cpu.
using flatten_indices_fn = Tensor (*)(const Tensor& indices, IntArrayRef size);
DECLARE_DISPATCH(flatten_indices_fn, flatten_indices_stub)
} // namespace at::native

namespace torch_npu_ops {
namespace {

// indices: (sparse_dim, nnz); size: the sparse dimensions' lengths. The
// offset of column j is sum over d of indices[d][j] * stride[d], with the
// strides of a contiguous tensor of `size`.
at::Tensor flatten_indices_npu(const at::Tensor& indices, at::IntArrayRef size) {
  std::vector<int64_t> strides(size.size());
  int64_t stride = 1;
  for (size_t d = size.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= size[d];
  }
  // non_blocking: from pageable memory the copy is still safe (staged, or
  // waited for), and it does not count as a synchronizing operation (Note
  // [Synchronizing operations]): CUDA's kernel makes no such copy.
  const at::Tensor weights = at::tensor(strides, at::TensorOptions().dtype(indices.scalar_type()))
                                 .to(indices.device(), /*non_blocking=*/true);
  return indices.mul(weights.unsqueeze(1)).sum(0);
}

} // namespace
} // namespace torch_npu_ops

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(flatten_indices_stub, &torch_npu_ops::flatten_indices_npu)
} // namespace at::native
