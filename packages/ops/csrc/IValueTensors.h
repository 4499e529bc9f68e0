// Walking and mapping the tensors inside boxed kernel arguments.
#pragma once

#include <ATen/core/ivalue.h>

#include <vector>

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

// The tensors in `v` (as for_each_tensor visits them), in order.
inline std::vector<at::Tensor> tensors_of(const c10::IValue& v) {
  std::vector<at::Tensor> out;
  for_each_tensor(v, [&](const at::Tensor& t) { out.push_back(t); });
  return out;
}

// Applies `f` to every tensor inside `v` (tensors, tensor lists and lists of
// optional tensors), rebuilding the containers.
template <typename F>
c10::IValue map_tensors(const c10::IValue& v, const F& f) {
  if (v.isTensor()) {
    return f(v.toTensor());
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    const auto list = v.toTensorList();
    out.reserve(list.size());
    for (const at::Tensor& t : list) {
      out.push_back(f(t));
    }
    return out;
  }
  if (v.isList()) {
    const auto list = v.toList();
    c10::impl::GenericList out(list.elementType());
    out.reserve(list.size());
    for (const c10::IValue& element : list) {
      out.push_back(map_tensors(element, f));
    }
    return out;
  }
  return v;
}

} // namespace torch_npu_ops
