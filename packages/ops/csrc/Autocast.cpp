// Autocast for npu: kernels of the AutocastPrivateUse1 dispatch key.
//
// torch.autocast("npu") puts AutocastPrivateUse1 into the dispatch keys of
// every op on npu tensors. Ops that autocast should handle get a wrapper that
// casts their floating-point npu inputs (the policy below) and redispatches
// below the autocast key; every other op falls through untouched. The
// wrappers are PyTorch's own (ATen/autocast_mode.h), instantiated for
// PrivateUse1, so npu follows exactly the casting rules, weight cache and
// nesting behaviour that CUDA users know.
//
// The op lists are CUDA's (as Ascend's torch_npu uses them), plus cross_entropy
// in fp32 as on the CPU and XPU (below): Ascend NPUs, like GPUs, run matmuls
// and convolutions fastest in fp16/bf16 (cube units), while reductions,
// transcendental functions, norms and losses need fp32 range or accuracy.
#include <ATen/autocast_mode.h>
#include <ATen/ops/_native_multi_head_attention.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>
#include <torch/version.h>

#include <optional>
#include <tuple>

namespace torch_npu_ops {
namespace {

// The op-list macros of autocast_mode.h spell signatures with unqualified
// ATen names.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// binary_cross_entropy takes probabilities: in fp16 the log of values near 0
// or 1 is badly wrong, and its backward divides by p * (1 - p). CUDA refuses
// it under autocast rather than silently training worse; npu users move
// their CUDA code over unchanged, so they get the same error.
Tensor binary_cross_entropy_banned(
    const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(
      false,
      "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast "
      "(on npu as on CUDA): their inputs are probabilities, usually from a sigmoid, which lose "
      "too much precision in float16/bfloat16.\n"
      "Fuse the sigmoid into the loss with torch.nn.functional.binary_cross_entropy_with_logits "
      "or torch.nn.BCEWithLogitsLoss, which are safe to autocast, or compute the loss outside "
      "the autocast region (after casting its inputs to float32).");
}

// Note [The fused attention path under autocast]
// torch declines the fused evaluation path of nn.MultiheadAttention under
// autocast (`torch.is_autocast_enabled()`), but torch 2.13 asks that of
// CUDA's autocast only: under npu autocast eval-mode MultiheadAttention
// called _native_multi_head_attention uncast and returned a float32 output,
// where CUDA's unfused path returns the autocast dtype (its projections are
// autocast linears). So the op is cast here: its inputs to the autocast
// dtype, as linear's are, and its attention weights back to float32, which
// is what the unfused path's softmax (an fp32 op) gives. The dtypes are
// then CUDA's; the values are close to, not the bits of, the unfused path's.
// (nn.TransformerEncoderLayer's fused path returns float32, as CUDA's
// unfused one does after its final layer norm: nothing to do there. torch
// 2.14 asks every device's autocast and declines both paths itself.)
std::tuple<Tensor, Tensor> native_multi_head_attention_autocast(
    const Tensor& query, const Tensor& key, const Tensor& value, int64_t embed_dim, int64_t num_head,
    const Tensor& qkv_weight, const Tensor& qkv_bias, const Tensor& proj_weight, const Tensor& proj_bias,
    const std::optional<Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastPrivateUse1);
  const ScalarType dtype = at::autocast::get_autocast_dtype(c10::DeviceType::PrivateUse1);
  const auto cast = [dtype](const auto& t) {
    return at::autocast::cached_cast(dtype, t, c10::DeviceType::PrivateUse1);
  };
  auto [output, weights] = at::_native_multi_head_attention(
      cast(query), cast(key), cast(value), embed_dim, num_head, cast(qkv_weight), cast(qkv_bias),
      cast(proj_weight), cast(proj_bias), cast(mask), need_weights, average_attn_weights, mask_type);
  return {output, weights.defined() ? weights.to(at::kFloat) : weights};
}

} // namespace

// Everything without an autocast policy runs as if autocast were off.
// Without this fallthrough, any op on npu (embedding, normal_, copy_, ...)
// fails under autocast with "Could not run ... from the 'AutocastPrivateUse1'
// backend".
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // Inputs cast to the autocast dtype (torch.get_autocast_dtype("npu")):
  // convolutions, matmuls, linear, RNN cells and attention.
#define TORCH_NPU_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(TORCH_NPU_LOWER_PRECISION_FP)
#undef TORCH_NPU_LOWER_PRECISION_FP

  // Note [The fused attention path under autocast]
  m.impl(TORCH_SELECTIVE_NAME("aten::_native_multi_head_attention"),
         TORCH_FN(native_multi_head_attention_autocast));

  // Inputs cast to fp32: exp/log family, pow, norms, losses, distances,
  // upsampling.
#define TORCH_NPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(TORCH_NPU_FP32)
#undef TORCH_NPU_FP32
  // Not in CUDA's list, but in PyTorch's CPU and XPU lists: cross_entropy
  // asks log_softmax for its input's own dtype, so without this it computes
  // the log-probabilities of fp16/bf16 logits in fp16/bf16 and returns a
  // float32 loss with a low-precision value (12.625 where CPU autocast gives
  // 12.623857). In fp32 it trains to the CPU's numbers.
  KERNEL_PRIVATEUSEONE(cross_entropy_loss, fp32)
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 14)
  // New in torch 2.14, where CUDA and CPU register it in fp32 by hand rather
  // than through AT_FORALL_FP32 (test_npu_autocast_kernels_are_cudas_plus_
  // cross_entropy finds any such op that npu misses).
  KERNEL_PRIVATEUSEONE(linalg_matrix_sqrth, fp32)
#endif

  // Ops with an optional output dtype (softmax, log_softmax, sum, prod,
  // cumsum, ...): accumulate and return fp32 unless the caller chose a dtype.
#define TORCH_NPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(TORCH_NPU_FP32_SET_OPT_DTYPE)
#undef TORCH_NPU_FP32_SET_OPT_DTYPE

  // norm overloads without a dtype argument redispatch to the overload with
  // one, asking for fp32.
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)

  // Ops that need their inputs in one dtype: all run in the widest
  // floating-point dtype among them (fp32 wins over the autocast dtype).
  // cat and stack are not here, as on CUDA: they promote by themselves.
#define TORCH_NPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(TORCH_NPU_PROMOTE)
#undef TORCH_NPU_PROMOTE

  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}

} // namespace torch_npu_ops
