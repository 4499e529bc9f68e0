#include "BoolPowers.h"

namespace torch_npu_ops {

void keep_bool_powers_bool(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                           OutputSpec& spec) {
  // Note [Powers of bools by a bool stay bool]
  if (schema.name() != "aten::_foreach_pow" || args.size() < 2 || !args[0].isTensorList() || spec.empty()) {
    return;
  }
  const auto tensors = args[0].toTensorList();
  const c10::IValue& exponent = args[1];
  std::vector<TensorSpec>& results = spec[0];
  for (size_t i = 0; i < tensors.size() && i < results.size(); ++i) {
    bool bool_exponent = false;
    if (exponent.isBool()) {
      bool_exponent = true; // .Scalar with True or False
    } else if (exponent.isList()) {
      const auto list = exponent.toListRef();
      bool_exponent = i < list.size() && list[i].isBool(); // .ScalarList
    }
    const at::Tensor& t = tensors.get(i);
    if (bool_exponent && t.defined() && t.scalar_type() == at::kBool && results[i].defined) {
      results[i].dtype = at::kBool;
    }
  }
}

} // namespace torch_npu_ops
