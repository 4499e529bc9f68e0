// native_dropout has no Generator argument: its CPU kernel draws from the
// CPU's default generator. On npu it is composed from ops that take the npu
// generator, so dropout masks follow torch.npu.manual_seed.
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/ones_like.h>
#include <torch/library.h>

namespace torch_npu_ops {
namespace {

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (input.numel() == 0 || !train.value_or(true) || p == 0) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  if (p == 1) {
    return {at::zeros_like(input), at::zeros_like(input, input.options().dtype(at::kBool))};
  }
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  mask.bernoulli_(1 - p); // npu generator
  at::Tensor output = at::mul(at::mul(input, mask), 1.0 / (1.0 - p));
  return {output, mask};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_dropout", TORCH_FN(native_dropout));
}

} // namespace torch_npu_ops
