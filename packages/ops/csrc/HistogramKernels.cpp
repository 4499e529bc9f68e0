// torch.histc of integer tensors.
//
// The CPU kernel of histc takes floating-point tensors only ("histogram_cpu"
// not implemented for 'Int'), so the generic executor, which runs it on npu
// memory, refused integer tensors. CUDA takes them, and code written for an
// accelerator relies on it: transformers' grouped MoE experts count the
// tokens per expert with histc of int32 expert ids on every device that is
// not the CPU (Mixtral, Qwen-MoE, DeepSeek on npu failed in their first
// forward). Integer tensors follow CUDA's definition here, composed from npu
// ops; floating-point tensors keep the CPU kernel, so their bin edges match
// the CPU's.
//
// CUDA's definition for integers, in integer arithmetic: min and max are
// truncated to integers; min == max takes the data's minimum and maximum
// (min - 1 and max + 1 if those are equal too); an element v with
// min <= v <= max falls in bin (v - min) * bins / (max - min), rounded toward
// zero, the last bin also holding max; other elements are not counted. The
// counts have the input's dtype.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include "DeviceOpExecutor.h"

namespace torch_npu_ops {
namespace {

at::Tensor integer_histc(const at::Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max) {
  TORCH_CHECK(bins > 0, "torch.histc: bins must be > 0, but got ", bins);
  int64_t lo = min.toLong();
  int64_t hi = max.toLong();
  const at::Tensor values = self.reshape(-1).to(at::kLong);
  if (lo == hi && values.numel() > 0) {
    // The range comes from the data: the host waits for it, as on CUDA.
    lo = values.min().item<int64_t>();
    hi = values.max().item<int64_t>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  TORCH_CHECK(lo < hi, "torch.histc: max must be larger than min, but got min=", lo, " and max=", hi);
  at::Tensor bin = (values - lo).mul_(bins).div_(hi - lo, "trunc").clamp_max_(bins - 1);
  // Elements outside [min, max] go to one extra slot, dropped at the end.
  const at::Tensor inside = values.ge(lo).logical_and_(values.le(hi));
  bin = at::where(inside, bin, bins);
  at::Tensor counts = at::zeros({bins + 1}, values.options()).scatter_add_(0, bin, at::ones_like(bin));
  return counts.narrow(0, 0, bins).to(self.scalar_type());
}

// histc and histc.out: (self, bins, min, max[, out]).
void histc_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t count = op.schema().arguments().size();
  auto args = torch::jit::last(*stack, count);
  const at::Tensor self = args[0].toTensor();
  if (!at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    run_on_npu(op, stack);
    return;
  }
  at::Tensor result = integer_histc(self, args[1].toInt(), args[2].toScalar(), args[3].toScalar());
  if (count == 5) {
    at::Tensor out = args[4].toTensor();
    TORCH_CHECK(out.scalar_type() == result.scalar_type(), "torch.histc: expected out of dtype ",
                result.scalar_type(), ", but got ", out.scalar_type());
    at::native::resize_output(out, result.sizes());
    out.copy_(result);
    result = out;
  }
  torch::jit::drop(*stack, count);
  torch::jit::push(*stack, std::move(result));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histc", torch::CppFunction::makeFromBoxedFunction<&histc_on_npu>());
  m.impl("histc.out", torch::CppFunction::makeFromBoxedFunction<&histc_on_npu>());
}

} // namespace torch_npu_ops
