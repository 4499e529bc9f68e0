// The sizes, strides and dtypes of an op's outputs, from its meta kernel.
//
// Meta kernels are the only generic way to know an op's outputs before
// running it, but many of them are Python functions (torch's meta
// registrations) costing tens of microseconds. Results are therefore cached
// by everything a meta kernel can depend on: the op, and each argument's
// metadata (sizes, strides, offset, dtype) or value (non-tensor arguments).
// Training steps repeat the same shapes, so steady-state ops hit the cache.
#pragma once

#include <memory>
#include <vector>

#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

#include "OpTranslation.h"

namespace torch_npu_ops {

struct TensorSpec {
  bool defined = false;
  c10::SmallVector<int64_t, 6> sizes;
  c10::SmallVector<int64_t, 6> strides;
  int64_t storage_offset = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};

// One spec per tensor of each return (a Tensor[] return has several).
using OutputSpec = std::vector<std::vector<TensorSpec>>;

// Null when the op has no usable meta kernel for these arguments (the caller
// then runs it synchronously).
std::shared_ptr<const OutputSpec> infer_outputs(
    const TranslatedOp& target, const std::vector<c10::IValue>& args);

} // namespace torch_npu_ops
