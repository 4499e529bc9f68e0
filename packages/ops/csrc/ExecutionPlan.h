// How the generic executor runs a call, decided before anything is
// allocated or queued.
//
// An op reaching the executor takes one of three paths: queued with its own
// CPU kernel (the host returns at once), queued through the out= overload of
// a functional op (the kernel writes straight into the npu outputs,
// OutVariants.h), or run synchronously (SynchronousExecution.h) when the
// host cannot know the outputs before the kernel ran. The decision rests on
// the op's schema and its meta kernel's output specs (OutputShapes.h).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include "OpTranslation.h"
#include "OutputShapes.h"

namespace torch_npu_ops {

struct ExecutionPlan {
  TranslatedOp target;
  // The outputs as the meta kernel describes them, one spec per tensor of
  // each return; null: the op runs synchronously.
  std::shared_ptr<const OutputSpec> outputs;
  // The out= overload that writes the op's fresh outputs, when it is used.
  std::optional<c10::OperatorHandle> out_op;
  // Synchronous because the result sizes depend on the input values
  // (nonzero, masked_select, ...): a synchronizing operation as on CUDA
  // (Note [Synchronizing operations], npu/SyncDebugMode.h).
  bool waits_for_values = false;

  bool synchronous() const {
    return outputs == nullptr;
  }
};

// Translates the op (OpTranslation.h) and decides its path. Raises in strict
// mode (TORCH_NPU_OPS_STRICT=1) when an op would run synchronously for want
// of a meta kernel.
ExecutionPlan plan_execution(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args);

} // namespace torch_npu_ops
