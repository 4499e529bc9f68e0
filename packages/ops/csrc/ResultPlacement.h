// Placing a CPU kernel's result straight into the npu output.
//
// Ops without an out= form (convolution and its backward, ...) let their CPU
// kernel allocate the result, which the work then copies into the output
// the host already handed out (ResultCopy.h). For a large result that copy
// is a visible share of the op: about 10% of a conv2d.
//
// CPU kernels allocate deterministically: the same op on arguments of the
// same geometry makes the same sequence of CPU allocations, and the result
// is always the same one of them (a oneDNN conv2d: the input's and the
// weight's reorders, the blocked destination, then the dense result). The
// first run of an op signature learns which allocation becomes each large
// result; later runs lend that allocation the npu output's own memory, so
// the kernel computes its result in place and nothing is copied.
//
// Correctness does not rest on the guess. A result counts as placed only if,
// when the kernel returns, it is exactly the output's memory with the
// output's geometry; anything else is copied as before, and the signature is
// no longer placed. Lending the output's memory is safe while the kernel
// runs: the output is fresh, and nothing reads it before this work
// completes. A kernel that kept a lent allocation beyond its end would alias
// the output: that is an error of the op, and the signature is no longer
// placed.
//
// The kernel's allocations are seen, and chosen ones lent, through the
// KernelAllocationScope the kernel runs in (KernelAllocator.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "KernelAllocator.h"

#include <memory>
#include <vector>

namespace torch_npu_ops {

// One run of a CPU kernel whose fresh results go to npu outputs. While it
// lives, the allocations of `allocations` are watched (and, for a learnt
// signature, one per large output is lent the output's memory).
class ResultPlacement {
 public:
  // `outputs`: CPU views of the fresh npu outputs, in result order;
  // `arguments`: the CPU kernel's arguments (their geometry is part of the
  // signature). Inactive when no output is large enough to be worth it.
  ResultPlacement(const c10::OperatorHandle& op, const std::vector<c10::IValue>& arguments,
                  const std::vector<at::Tensor>& outputs, KernelAllocationScope& allocations);
  ~ResultPlacement();
  ResultPlacement(const ResultPlacement&) = delete;
  ResultPlacement& operator=(const ResultPlacement&) = delete;

  // After the kernel returned `results` (one per output, in order): what to
  // copy into each output, an undefined tensor where the result already is
  // the output. A result that lives in lent memory without being placed is
  // cloned first, so that copying into one output cannot overwrite another
  // output's source. Learns the signature on its first run.
  std::vector<at::Tensor> resolve(std::vector<at::Tensor> results);

  // Once the results are dropped: checks that every lent allocation was
  // given back (raises otherwise) and stops watching allocations.
  void close();

  struct Scope; // per-run state: the scope's lender

 private:
  std::unique_ptr<Scope> scope_;
};

} // namespace torch_npu_ops
