#include "KernelResultLayouts.h"

#include <ATen/ops/empty.h>

namespace torch_npu_ops {
namespace {

void restride(TensorSpec& result, c10::MemoryFormat memory_format) {
  if (!result.defined) {
    return;
  }
  const at::Tensor laid_out =
      at::empty(result.sizes, at::TensorOptions().device(c10::DeviceType::Meta).dtype(result.dtype), memory_format);
  result.strides.assign(laid_out.strides().begin(), laid_out.strides().end());
  result.storage_offset = 0;
}

} // namespace

void lay_out_as_the_cpu_kernel(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                               OutputSpec& spec) {
  // Note [Results laid out as the CPU kernel lays them out]
  if (!schema.overload_name().empty() || args.empty() || !args[0].isTensor() || spec.empty()) {
    return; // the functional overloads only: an out= keeps the out's layout
  }
  const std::string& name = schema.name();
  const at::Tensor& self = args[0].toTensor();
  if (name == "aten::native_channel_shuffle" || name == "aten::channel_shuffle") {
    if (self.numel() > 0 && spec[0].size() == 1) { // an empty input: the CPU returns an alias
      restride(spec[0][0], self.suggest_memory_format());
    }
  } else if (name == "aten::max_unpool2d") {
    if (self.dim() == 4 && spec[0].size() == 1) {
      restride(spec[0][0], self.suggest_memory_format());
    }
  } else if (name == "aten::log_sigmoid_forward" || name == "aten::rrelu_with_noise") {
    for (auto& results : spec) {
      for (TensorSpec& result : results) {
        restride(result, c10::MemoryFormat::Contiguous);
      }
    }
  }
}

} // namespace torch_npu_ops
