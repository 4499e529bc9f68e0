// Ops that PyTorch routes differently for PrivateUse1 than for CPU.
//
// On PrivateUse1, aten::convolution lands in convolution_overrideable (and
// its backward in convolution_backward_overrideable), which have no CPU
// kernels; they run as aten::convolution / aten::convolution_backward.
#pragma once

#include <functional>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>

namespace torch_npu_ops {

struct TranslatedOp {
  c10::OperatorHandle op;                     // what runs on Meta and CPU
  const c10::FunctionSchema& caller_schema;   // the op that was called
  std::function<std::vector<c10::IValue>(const std::vector<c10::IValue>&)> adapt;

  std::vector<c10::IValue> args_for(const std::vector<c10::IValue>& args) const {
    return adapt ? adapt(args) : args;
  }
};

TranslatedOp translate(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args);

} // namespace torch_npu_ops
