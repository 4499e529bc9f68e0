// The device work items of the generic executor's asynchronous path: an op's
// CPU kernel run on CPU aliases of outputs the host already allocated.
//
// The host returns as soon as an item is queued, so an item carries
// everything its kernel needs as values made at launch (KernelArguments.h)
// and writes its results into the npu outputs the host handed out. An item
// may run many times (Note [Device work items run many times],
// packages/core/csrc/npu/NPUWork.h): each run builds the kernel's stack
// afresh with as_stack and leaves the item's members as it found them,
// hence the const call operators.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include "CpuAliases.h"

namespace torch_npu_ops {

// A functional op run through its out= overload (OutVariants.h): the CPU
// kernel writes straight into the fresh npu outputs. Falls back to the
// functional kernel, and stops using the overload for the op, when the out=
// kernel cannot write into fixed-size device outputs.
struct OutVariantWork {
  c10::OperatorHandle functional;
  c10::OperatorHandle op; // functional's out= overload
  // The functional op's CPU arguments, then the CPU aliases of the last
  // `num_outputs` of them: the fresh outputs.
  std::vector<c10::IValue> cpu_args;
  size_t num_outputs;
  std::vector<DeviceGeometry> output_geometry; // of the fresh outputs, at launch
  bool grad_enabled;

  void operator()() const;
};

// The op's own CPU kernel: a functional op's results are copied into the
// fresh npu outputs (or computed there, ResultPlacement.h); an in-place or
// out= kernel writes into its npu arguments' memory, which is kept laid out
// as the npu tensors expect it.
struct OpKernelWork {
  c10::OperatorHandle op;
  std::vector<c10::IValue> cpu_args;
  std::vector<at::Tensor> fresh_views;  // CPU aliases of the fresh npu outputs, in return order
  std::vector<bool> return_is_fresh;    // per return: its tensors go to fresh_views
  std::vector<std::pair<size_t, DeviceGeometry>> out_args; // the out= arguments, by position
  std::vector<std::pair<bool, bool>> out_bits; // the npu out arguments' conjugate and negative bits
  bool grad_enabled;

  void operator()() const;
};

} // namespace torch_npu_ops
