#include "OpTranslation.h"

namespace torch_npu_ops {
namespace {

const c10::OperatorHandle& find(const char* name, const char* overload) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  // OperatorHandles stay valid for the life of the process.
  static std::vector<std::pair<std::string, c10::OperatorHandle>> cache;
  const std::string key = std::string(name) + "." + overload;
  for (const auto& entry : cache) {
    if (entry.first == key) {
      return entry.second;
    }
  }
  cache.emplace_back(key, c10::Dispatcher::singleton().findSchemaOrThrow(name, overload));
  return cache.back().second;
}

} // namespace

TranslatedOp translate(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args) {
  const auto& name = op.schema().name();
  if (name == "aten::convolution_overrideable") {
    return {find("aten::convolution", ""), op.schema(), nullptr};
  }
  if (name == "aten::convolution_backward_overrideable") {
    // convolution_backward takes bias_sizes after weight.
    auto adapt = [](const std::vector<c10::IValue>& a) {
      const at::Tensor& weight = a[2].toTensor();
      const bool transposed = a[6].toBool();
      const int64_t groups = a[8].toInt();
      const int64_t channels = transposed ? weight.size(1) * groups : weight.size(0);
      std::vector<c10::IValue> out(a.begin(), a.begin() + 3);
      out.emplace_back(std::vector<int64_t>{channels});
      out.insert(out.end(), a.begin() + 3, a.end());
      return out;
    };
    return {find("aten::convolution_backward", ""), op.schema(), adapt};
  }
  return {op, op.schema(), nullptr};
}

} // namespace torch_npu_ops
