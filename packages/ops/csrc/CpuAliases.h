// npu tensors seen as CPU tensors over the same device memory, for the CPU
// kernels the generic executor runs as device work.
//
// The executor runs an op's CPU kernel on the stream's worker, directly on
// device memory: each npu tensor the kernel reads or writes is wrapped as a
// CPU tensor over the simulator's host-access alias of its memory (a CPU
// alias). Aliases are made on the host but dereferenced only inside device
// work. Some CPU kernels change the geometry or the math bits of their out=
// tensors, which the npu tensor cannot follow once the host handed it out:
// the helpers below put the values back the way the npu tensor expects them.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

#include "OutputShapes.h"

namespace torch_npu_ops {

inline bool is_npu(const at::Tensor& t) {
  return t.defined() && t.device().is_privateuseone();
}

// Some CPU kernels compute outputs for the backward only when an input
// requires grad (sparse.mm's amax/amin argument indices): a kernel's CPU
// alias requires grad where the npu tensor does. It runs below autograd
// (BelowAutograd), so nothing is recorded.
void keep_requires_grad(at::Tensor& alias, const at::Tensor& t);

// An npu tensor seen as a CPU tensor over the same memory. Dereferenced
// only inside device work (the address is the simulator's host alias).
at::Tensor cpu_alias(const at::Tensor& t);

std::vector<at::Tensor> cpu_aliases(const std::vector<at::Tensor>& tensors);

// A view of `base` with the geometry and dtype of `spec`, which came from a
// meta base at storage offset 0. view_as_real and view_as_complex change the
// dtype, so the offset is combined in bytes.
at::Tensor view_of(const at::Tensor& base, const TensorSpec& spec);

// Some CPU out= kernels leave their output a conjugate view of the values
// they stored (linalg_lu_solve with left=False flips the output's conjugate
// bit). The npu output cannot take the flag once the host has it: give the
// CPU alias `out` back the npu tensor's bits and store the values instead.
void keep_math_bits(const at::Tensor& out, bool conj, bool neg);

// Some CPU out= kernels restride their output to the input's memory format
// (max_unpool2d with a channels-last input): the values are then laid out
// with the new strides in the same memory, which the npu tensor, made with
// the meta kernel's strides, would misread. Lay them out as npu expects. A
// kernel that resized its output cannot be followed: that raises.
void keep_geometry(const at::Tensor& out, void* data, c10::IntArrayRef sizes, c10::IntArrayRef strides);

// Where a tensor's values live in device memory and how they are laid out,
// as a kernel first sees it (a failing kernel may change the tensor).
struct DeviceGeometry {
  void* data;
  c10::SmallVector<int64_t, 6> sizes;
  c10::SmallVector<int64_t, 6> strides;
  c10::ScalarType dtype;

  explicit DeviceGeometry(const at::Tensor& t)
      : data(t.data_ptr()),
        sizes(t.sizes().begin(), t.sizes().end()),
        strides(t.strides().begin(), t.strides().end()),
        dtype(t.scalar_type()) {}

  // A CPU tensor over that memory with that layout (only inside device work).
  at::Tensor view() const;
};

std::vector<DeviceGeometry> geometries(const std::vector<at::Tensor>& views);

// The out= arguments of an op (by position) with their geometry.
std::vector<std::pair<size_t, DeviceGeometry>> out_argument_geometry(
    const c10::FunctionSchema& schema, const std::vector<c10::IValue>& cpu_args);

} // namespace torch_npu_ops
