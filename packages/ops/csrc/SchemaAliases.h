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

// Whether `info` marks an alias that is read, not written: a view. A list of
// views (unbind's `Tensor(a)[]`) has its alias set on the list's elements.
inline bool is_view_alias(const c10::AliasInfo* info) {
  if (info == nullptr) {
    return false;
  }
  if (!info->beforeSets().empty() && !info->isWrite()) {
    return true;
  }
  for (const c10::AliasInfo& element : info->containedTypes()) {
    if (is_view_alias(&element)) {
      return true;
    }
  }
  return false;
}

// Whether `schema` returns views of its arguments.
inline bool returns_views(const c10::FunctionSchema& schema) {
  for (const c10::Argument& ret : schema.returns()) {
    if (is_view_alias(ret.alias_info())) {
      return true;
    }
  }
  return false;
}

} // namespace torch_npu_ops
