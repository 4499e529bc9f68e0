// convolution_overrideable and its backward have default kernels that throw
// for every backend but CPU/CUDA; PrivateUse1 must register its own. They
// run through the generic executor, which translates them to
// aten::convolution / aten::convolution_backward (see OpTranslation).
#include <torch/library.h>

#include "DeviceOpExecutor.h"

namespace torch_npu_ops {
namespace {

// Note [Convolution gradients in the layout fake tensors give them]
// torch.compile plans an npu convolution's outputs with the fake-tensor rule
// of aten.convolution and convolution_backward, which lays them out as
// _conv_determine_backend_memory_format says for the backend npu selects,
// "Overrideable": contiguous. The forward's outputs come out so; the
// backward's came out as the CPU kernel lays them, channels-last for a
// channels-last input (ConvNeXt's downsampling convolution reads a permuted
// LayerNorm output), and Inductor's stride assertion after the extern
// kernel stopped the compiled backward. The gradients of input and weight
// are therefore returned contiguous, as the rule says; the bias gradient is
// 1-d. So is the forward's output: the meta kernel lays it out contiguous,
// but a convolution run synchronously (Note [Python meta kernels and the
// first op]: the first ops of a process, before the meta kernels are ready)
// took the CPU kernel's layout, channels-last for a channels-last input, so
// that the same convolution returned another layout a second later.
void make_results_contiguous(torch::jit::Stack* stack, size_t returns, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    c10::IValue& result = (*stack)[stack->size() - returns + i];
    if (result.isTensor() && result.toTensor().defined() && !result.toTensor().is_contiguous()) {
      result = result.toTensor().contiguous();
    }
  }
}

void convolution_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_on_npu(op, stack);
  make_results_contiguous(stack, /*returns=*/1, /*count=*/1);
}

void convolution_backward_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_on_npu(op, stack);
  make_results_contiguous(stack, /*returns=*/3, /*count=*/2);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", torch::CppFunction::makeFromBoxedFunction<&convolution_on_npu>());
  m.impl("convolution_backward_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&convolution_backward_on_npu>());
}

} // namespace torch_npu_ops
