// The dense results of a sparse op, known before it runs, so that the op is
// queued like a dense one instead of making the host wait.
//
// Two sources:
// - the op's sparse meta kernel (a CSR tensor's to_dense, ...);
// - for ops that have none (PyTorch has no SparseCsrMeta addmm, no SparseMeta
//   mm, ...), the op's dense meta kernel run with a dense stand-in of each
//   sparse argument (same sizes and dtype). A sparse matrix times a dense one
//   has the shape of the dense product, but the stand-in is only trusted once
//   the CPU kernel has confirmed it: the first call with a given structure
//   (op, layouts, dtypes, ranks, non-tensor arguments) runs synchronously, and
//   if its results are dense and have the stand-in's sizes and dtypes, later
//   calls with that structure are queued, their results laid out in memory
//   as the CPU laid out the first (dense @ COO is column-major on the CPU,
//   unlike the dense product). Otherwise (a sparse result, no dense meta
//   kernel) they keep waiting.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>

#include "OpTranslation.h"
#include "OutputShapes.h"

namespace torch_npu_ops {

struct SparseResultVerdict;

// One call of a sparse op: what is known of its results before it runs, and
// what its synchronous run shows for later calls of the same structure.
class SparseOpResults {
 public:
  // Looks up what earlier calls of this structure showed. `target` and
  // `args` must outlive this object.
  SparseOpResults(const TranslatedOp& target, const std::vector<c10::IValue>& args);

  // The specs of the op's results (one per return) if they are all dense
  // tensors whose shapes are known without running it: fresh results, or
  // dense arguments the op writes into (out=, in-place); nothing otherwise.
  std::optional<std::vector<TensorSpec>> predict() const;

  // After the op ran synchronously and left `results`: records, once per
  // structure, whether the dense stand-ins predict results like these.
  void learn(c10::ArrayRef<c10::IValue> results) const;

 private:
  const TranslatedOp& target_;
  const std::vector<c10::IValue>& args_;
  const bool single_tensors_; // every return one tensor, fresh or written into an argument
  std::string key_;           // the structure (set when single_tensors_)
  std::shared_ptr<const SparseResultVerdict> verdict_; // null until a call of the structure was learnt
};

} // namespace torch_npu_ops
