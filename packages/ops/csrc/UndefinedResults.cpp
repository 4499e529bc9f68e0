#include "UndefinedResults.h"

#include <optional>

namespace torch_npu_ops {
namespace {

std::optional<c10::IValue> argument(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                                    const char* name) {
  const auto index = schema.argumentIndexWithName(name);
  if (!index.has_value() || *index >= args.size()) {
    return std::nullopt;
  }
  return args[*index];
}

void undefine(OutputSpec& spec, size_t result) {
  if (result < spec.size() && spec[result].size() == 1) {
    spec[result][0] = TensorSpec{};
  }
}

} // namespace

void leave_undefined_as_the_cpu_kernel(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                                       OutputSpec& spec) {
  // Note [Results the CPU kernel leaves undefined]
  if (!schema.overload_name().empty()) {
    return; // out= overloads return their outs
  }
  const std::string& name = schema.name();
  if (name == "aten::_native_multi_head_attention") {
    const auto need_weights = argument(schema, args, "need_weights");
    if (need_weights.has_value() && need_weights->isBool() && !need_weights->toBool()) {
      undefine(spec, 1);
    }
  } else if (name == "aten::native_batch_norm_backward" || name == "aten::batch_norm_backward") {
    const auto mask = argument(schema, args, "output_mask");
    if (!mask.has_value() || !mask->isBoolList()) {
      return;
    }
    const auto bools = mask->toBoolList();
    for (size_t i = 0; i < bools.size(); ++i) {
      if (!bools.get(i)) {
        undefine(spec, i);
      }
    }
  }
}

} // namespace torch_npu_ops
