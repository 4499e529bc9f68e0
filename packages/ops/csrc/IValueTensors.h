// Walking the tensors inside boxed kernel arguments.
#pragma once

#include <ATen/core/ivalue.h>

namespace torch_npu_ops {

// Calls `f` on every tensor in `v`: a tensor, a tensor list, or a generic
// list (optional tensors, nested lists) holding tensors. Undefined tensors
// are passed too.
template <typename F>
void for_each_tensor(const c10::IValue& v, const F& f) {
  if (v.isTensor()) {
    f(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) {
      f(t);
    }
  } else if (v.isList()) {
    for (const c10::IValue& element : v.toList()) {
      for_each_tensor(element, f);
    }
  }
}

} // namespace torch_npu_ops
