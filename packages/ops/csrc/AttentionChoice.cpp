// scaled_dot_product_attention picks its kernel through
// _fused_sdp_choice_stub, which has no npu entry unless a backend registers
// one: npu would always run the math decomposition, where the CPU runs its
// flash kernel for most inputs, so results and gradients would round
// differently from the CPU's (and the math decomposition is slower). npu
// makes the CPU's choice instead; the CPU's _fused_sdp_choice reads only the
// inputs' shapes, dtypes and flags. Flash attention then dispatches
// _scaled_dot_product_flash_attention_for_cpu and its backward, which run as
// device work like every other op.
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_ops.h>

namespace torch_npu_ops {
namespace {

int64_t fused_sdp_choice_npu(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal, std::optional<double> scale,
    bool enable_gqa) {
  return at::_ops::_fused_sdp_choice::redispatch(
      c10::DispatchKeySet(c10::DispatchKey::CPU), query, key, value, attn_mask, dropout_p, is_causal, scale,
      enable_gqa);
}

} // namespace
} // namespace torch_npu_ops

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_npu_ops::fused_sdp_choice_npu)
} // namespace at::native
