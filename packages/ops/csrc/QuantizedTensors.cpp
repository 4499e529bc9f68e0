// Quantized tensors on npu: refused at the call, saying what to do.
//
// A quantized tensor (torch.quint8, qint8, qint32, quint4x2, quint2x4) on
// npu dispatches to the QuantizedPrivateUse1 key, which has no kernels:
// npu has no quantized tensor type yet (a QTensorImpl over npu memory, and
// CPU aliases that carry its quantizer to the CPU's quantized kernels).
// Two doors lead to one, and both refuse before anything is allocated or
// queued, with an error that says to quantize on the CPU:
// - making a quantized npu tensor directly (_empty_affine_quantized, Tensor.to
//   through empty_quantized, torch.empty with a quantized dtype) reaches the
//   QuantizedPrivateUse1 key: one fallback there refuses them all. Without
//   it the dispatcher's "Could not run ... from the 'Quantizednpu' backend"
//   named an internal op;
// - quantizing an npu float tensor (quantize_per_tensor, ...) dispatches on
//   its input, to PrivateUse1: the generic executor would take the meta
//   kernel's float32 output for the CPU kernel's quantized one (and the work
//   then fails to copy it). Those ops are refused for a quantized dtype;
//   other dtypes go on to the executor, whose CPU kernel refuses them as the
//   CPU does.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "DeviceOpExecutor.h"

namespace torch_npu_ops {
namespace {

[[noreturn]] void refuse_quantized(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "npu does not support quantized tensors (torch.quint8, torch.qint8, torch.qint32, torch.quint4x2, ",
      "torch.quint2x4) yet: ", op.schema().name(), " would make one on npu. Quantize on the CPU instead, "
      "e.g. torch.quantize_per_tensor(x.cpu(), scale, zero_point, dtype), run the quantized ops there, and move "
      "the dequantized result back with q.dequantize().to('npu').");
}

// The quantizing ops: refused when their result would be quantized (a
// quantized `dtype` argument; the _make_*_quantized_tensor ops always).
void quantize_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const auto first = stack->size() - arguments.size();
  bool quantized = true;
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].name() == "dtype") {
      const c10::IValue& dtype = (*stack)[first + i];
      quantized = dtype.isInt() && c10::isQIntType(static_cast<c10::ScalarType>(dtype.toInt()));
    }
  }
  if (quantized) {
    refuse_quantized(op, stack);
  }
  run_on_npu(op, stack);
}

} // namespace

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_quantized>());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name :
       {"quantize_per_tensor", "quantize_per_tensor.tensor_qparams", "quantize_per_tensor.tensors",
        "quantize_per_tensor_dynamic", "quantize_per_channel", "_make_per_tensor_quantized_tensor",
        "_make_per_channel_quantized_tensor"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&quantize_on_npu>());
  }
}

} // namespace torch_npu_ops
