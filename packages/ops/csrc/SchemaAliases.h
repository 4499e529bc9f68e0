// Which argument an op's return aliases, from the schema's alias sets.
#pragma once

#include <ATen/core/function_schema.h>

namespace torch_npu_ops {

// The index of the argument that `ret` (one of `schema`'s returns) aliases:
// `self` for an in-place op, `out` for an out= op, the base of a view; -1 for
// a fresh result.
inline int aliased_argument(const c10::FunctionSchema& schema, const c10::Argument& ret) {
  const auto* ret_alias = ret.alias_info();
  if (ret_alias == nullptr) {
    return -1;
  }
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    const auto* alias = arguments[i].alias_info();
    if (alias != nullptr && alias->beforeSets() == ret_alias->beforeSets()) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

} // namespace torch_npu_ops
