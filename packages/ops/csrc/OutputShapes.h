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

// Note [Meta kernels shape the CPU kernel's outputs]
// torch's Python meta kernels follow the kernel of the device their input
// is on (torch._meta_registrations.device_hint): output layouts (linalg.eig's
// column-major eigenvectors, the FFTs' strides, _linalg_svd's V) and some
// checks differ between the CPU and CUDA kernels. A meta tensor says no
// device, and device_hint takes CUDA's then. npu runs the CPU's kernels,
// so while the executor shapes an npu op's outputs (infer_outputs, on the
// launching thread) device_hint answers "cpu" for meta tensors; the plugin's
// Python side installs that device_hint (torch_npu/ops/_device_tables.py),
// which also answers "cpu" for fake tensors on npu (torch.compile's shape
// propagation). Results then get the CPU's strides, as they would on the CPU.
bool shaping_npu_outputs();

} // namespace torch_npu_ops
