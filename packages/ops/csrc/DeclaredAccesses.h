// What a boxed kernel reads and writes, from its schema, for the simulator's
// stream race detector (Note [Stream race detection], core's
// npu/WorkAccesses.h).
#pragma once

#include <vector>

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include "IValueTensors.h"
#include "NestedTensors.h"
#include "SparseTensors.h"
#include "npu/WorkAccesses.h"

namespace torch_npu_ops {

// A tensor's device memory: a sparse tensor's is its members', a nested
// tensor's its buffer.
inline void declare_tensor_access(c10_npu::WorkAccessScope& accesses, const at::Tensor& t, bool write) {
  if (is_nested(t)) {
    accesses.add(nested_buffer(t), write);
  } else if (is_sparse_layout(t)) {
    for (const at::Tensor& member : sparse_members(t)) {
      accesses.add(member, write);
    }
  } else {
    accesses.add(t, write);
  }
}

// The kernel reads its tensor arguments and writes its mutable ones (alias
// annotations with `!`: in-place and out= arguments).
inline void declare_argument_accesses(c10_npu::WorkAccessScope& accesses, const c10::FunctionSchema& schema,
                                      const std::vector<c10::IValue>& args) {
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < args.size() && i < arguments.size(); ++i) {
    const c10::AliasInfo* alias = arguments[i].alias_info();
    const bool write = alias != nullptr && alias->isWrite();
    for_each_tensor(args[i], [&](const at::Tensor& t) { declare_tensor_access(accesses, t, write); });
  }
}

} // namespace torch_npu_ops
