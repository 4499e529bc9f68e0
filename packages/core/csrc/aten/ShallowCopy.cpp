// Which tensors `param.data = t` (Variable.set_data) may shallow-copy into
// each other: aten::_has_compatible_shallow_copy_type for npu.
//
// Note [Shallow-copy compatibility of npu tensors]
// PyTorch decides it in TensorImpl::has_compatible_shallow_copy_type, from
// the two dispatch key sets: equal key sets, or the same layout (dense,
// sparse, sparse compressed) on backends it lists. The list names the
// in-tree backends (CPU, CUDA, ...) and not PrivateUse1, so a CPU tensor and
// an npu tensor were "incompatible". That is what breaks when
// nn.Module._apply (Module.to, .npu(), .cpu(), .to(dtype)) asks it: the
// module gets new Parameter objects instead of keeping its own, tied weights
// come apart, and an optimizer built before the move keeps stepping the old
// CPU tensors while the model trains nothing. On CUDA (and on Ascend's
// torch_npu) the objects are kept.
//
// The fix is at the same depth: npu is compatible wherever PyTorch would
// find the CPU compatible. npu tensors are plain TensorImpls (or
// SparseTensorImpl / SparseCsrTensorImpl, as on the CPU), so set_data's
// shallow_copy_from moves storage, sizes, device and keys over correctly.
// Callers such as Module._apply, load_state_dict and optimizers need no
// change. The kernel is registered for every npu key the question can
// reach: the autograd key (tensors that have one), and the dense and sparse
// backend keys (inference tensors have no autograd keys).
#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKeySet.h>
#include <torch/library.h>

namespace c10_npu::aten {
namespace {

constexpr auto kNPUBit = c10::BackendComponent::PrivateUse1Bit;

bool is_npu(c10::DispatchKeySet keys) {
  return keys.has_backend(kNPUBit);
}

// `keys` with the npu backend read as the CPU.
c10::DispatchKeySet as_cpu(c10::DispatchKeySet keys) {
  if (!is_npu(keys)) {
    return keys;
  }
  return keys.remove_backend(kNPUBit) | c10::DispatchKeySet(c10::BackendComponent::CPUBit);
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  c10::TensorImpl* self_impl = self.unsafeGetTensorImpl();
  if (self_impl->has_compatible_shallow_copy_type(from.key_set())) {
    return true;
  }
  const bool self_npu = is_npu(self.key_set());
  const bool from_npu = is_npu(from.key_set());
  if (self_npu && !from_npu) {
    // PyTorch's rule is symmetric: ask it from `from`'s side, with self's
    // npu keys read as CPU keys.
    return from.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(as_cpu(self.key_set()));
  }
  if (from_npu && !self_npu) {
    return self_impl->has_compatible_shallow_copy_type(as_cpu(from.key_set()));
  }
  // Both on npu: as two CPU tensors of these layouts would be, which needs
  // only their layout class (the key sets differ, or the check above passed).
  const auto layout_class = [](c10::DispatchKeySet keys) {
    if (keys.has_any(c10::DispatchKeySet(c10::DispatchKey::SparseCsr))) {
      return 2;
    }
    if (keys.has_any(c10::DispatchKeySet(c10::DispatchKey::Sparse))) {
      return 1;
    }
    return keys.has_any(c10::DispatchKeySet(c10::DispatchKey::Dense)) ? 0 : -1;
  };
  const int self_class = layout_class(self.key_set());
  return self_class >= 0 && self_class == layout_class(from.key_set());
}

} // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

} // namespace c10_npu::aten
