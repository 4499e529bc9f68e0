#include "RangeFactoryOuts.h"

#include <string>

#include <ATen/ops/empty.h>
#include <c10/util/accumulate.h>

#include "IValueTensors.h"
#include "SchemaAliases.h"

namespace torch_npu_ops {

bool keeps_out_of_result_numel(const c10::FunctionSchema& schema) {
  // Note [Range factories keep an out of the right size]: every overload of
  // these names reaches the same CPU out= kernels.
  const std::string& name = schema.name();
  return name == "aten::arange" || name == "aten::range" || name == "aten::linspace" || name == "aten::logspace";
}

bool resizes_a_filled_range_out(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                                const OutputSpec& spec) {
  if (!keeps_out_of_result_numel(schema)) {
    return false;
  }
  const auto& returns = schema.returns();
  for (size_t i = 0; i < returns.size() && i < spec.size(); ++i) {
    const int alias = aliased_argument(schema, returns[i]);
    if (alias < 0 || !schema.arguments()[alias].is_out()) {
      continue;
    }
    const auto outs = tensors_of(args[alias]);
    for (size_t k = 0; k < outs.size() && k < spec[i].size(); ++k) {
      if (spec[i][k].defined && outs[k].numel() > 0 && outs[k].numel() != c10::multiply_integers(spec[i][k].sizes)) {
        return true;
      }
    }
  }
  return false;
}

void empty_out_arguments(const c10::FunctionSchema& schema, torch::jit::Stack& stack) {
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size() && i < stack.size(); ++i) {
    if (arguments[i].is_out() && stack[i].isTensor() && stack[i].toTensor().defined()) {
      const at::Tensor& out = stack[i].toTensor();
      stack[i] = at::empty({0}, out.options());
    }
  }
}

} // namespace torch_npu_ops
