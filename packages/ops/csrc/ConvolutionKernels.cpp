// convolution_overrideable and its backward have default kernels that throw
// for every backend but CPU/CUDA; PrivateUse1 must register its own. They
// run through the generic executor, which translates them to
// aten::convolution / aten::convolution_backward (see OpTranslation).
#include <torch/library.h>

#include <sstream>
#include <vector>

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

// A transposed convolution's output padding must be smaller than its stride
// or its dilation, in each spatial dimension. The CPU kernel checks that
// (its slow transposed kernels' shape check, with this message; a 1-d
// convolution runs as a 2-d one of height 1), the meta kernel does not, and
// the call signature keys integers by their sign: after one clean call, a
// call with a too large output padding was queued and failed at a later
// synchronization. Inputs without elements reach no such kernel on the CPU.
void check_output_padding(const torch::jit::Stack& stack, size_t first) {
  const c10::IValue& input = stack[first];
  const c10::IValue& stride = stack[first + 3];
  const c10::IValue& dilation = stack[first + 5];
  const c10::IValue& transposed = stack[first + 6];
  const c10::IValue& output_padding = stack[first + 7];
  if (!transposed.isBool() || !transposed.toBool() || !input.isTensor() || input.toTensor().numel() == 0 ||
      !stride.isIntList() || !dilation.isIntList() || !output_padding.isIntList()) {
    return;
  }
  std::vector<int64_t> strides = stride.toIntVector();
  std::vector<int64_t> dilations = dilation.toIntVector();
  std::vector<int64_t> paddings = output_padding.toIntVector();
  if (strides.size() != paddings.size() || dilations.size() != paddings.size() || paddings.empty() ||
      paddings.size() > 3) {
    return; // the kernel raises its own error
  }
  if (paddings.size() == 1) { // as a 2-d convolution of height 1
    strides.insert(strides.begin(), 1);
    dilations.insert(dilations.begin(), 1);
    paddings.insert(paddings.begin(), 0);
  }
  bool fits = true;
  for (size_t i = 0; i < paddings.size(); ++i) {
    fits = fits && (paddings[i] < strides[i] || paddings[i] < dilations[i]);
  }
  if (fits) {
    return;
  }
  static const char* const kNames2d[] = {"height", "width"};
  static const char* const kNames3d[] = {"depth", "height", "width"};
  const char* const* names = paddings.size() == 3 ? kNames3d : kNames2d;
  std::ostringstream message;
  message << "output padding must be smaller than either stride or dilation, but got";
  for (size_t i = 0; i < paddings.size(); ++i) {
    message << " output_padding_" << names[i] << ": " << paddings[i];
  }
  for (size_t i = 0; i < paddings.size(); ++i) {
    message << " stride_" << names[i] << ": " << strides[i];
  }
  for (size_t i = 0; i < paddings.size(); ++i) {
    message << " dilation_" << names[i] << ": " << dilations[i];
  }
  TORCH_CHECK(false, message.str());
}

void convolution_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  check_output_padding(*stack, stack->size() - op.schema().arguments().size());
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
