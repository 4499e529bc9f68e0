#include "UndefinedResults.h"

namespace torch_npu_ops {

void leave_undefined_as_the_cpu_kernel(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                                       OutputSpec& spec) {
  // Note [Results the CPU kernel leaves undefined]
  if (schema.name() != "aten::_native_multi_head_attention" || schema.overload_name() != "" || spec.size() < 2 ||
      spec[1].empty()) {
    return;
  }
  const auto need_weights = schema.argumentIndexWithName("need_weights");
  if (!need_weights.has_value() || *need_weights >= args.size() || !args[*need_weights].isBool()) {
    return;
  }
  if (!args[*need_weights].toBool()) {
    spec[1][0] = TensorSpec{};
  }
}

} // namespace torch_npu_ops
