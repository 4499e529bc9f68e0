#include "EmptyDimLists.h"

#include <string>

namespace torch_npu_ops {

void empty_dim_list_as_every_dim(const c10::FunctionSchema& schema, torch::jit::Stack& stack) {
  // Note [An empty dim list reduces every dim]: the reductions whose meta and
  // CPU kernels disagree on dim=[] (sum's meta kernel is the CPU's own).
  if (schema.name() != "aten::nansum") {
    return;
  }
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size() && i < stack.size(); ++i) {
    if (arguments[i].name() == "dim" && stack[i].isIntList() && stack[i].toIntList().empty()) {
      stack[i] = c10::IValue();
    }
  }
}

} // namespace torch_npu_ops
