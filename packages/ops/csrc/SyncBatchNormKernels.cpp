// npu kernels of the five ops torch.nn.SyncBatchNorm is made of.
//
// batch_norm_stats, batch_norm_gather_stats_with_counts, batch_norm_elemt,
// batch_norm_backward_reduce and batch_norm_backward_elemt have CUDA kernels
// only: through the generic executor, which runs an op's CPU kernel, a
// SyncBatchNorm on npu (convert_sync_batchnorm, then training with DDP over
// hccl) failed with "Could not run 'aten::batch_norm_stats' with arguments
// from the 'CPU' backend". Here each is composed of npu ops, so it queues
// device work like any other op and never waits for the device. They follow
// what the CUDA kernels compute (aten/src/ATen/native/cuda/Normalization.cu):
// - statistics in the accumulation type (float32 for float16/bfloat16
//   inputs), the variance biased (divided by the element count), invstd =
//   1 / sqrt(var + eps);
// - the gathered statistics are every rank's, weighted by its element count
//   (a rank's biased variance is recovered as 1 / invstd^2 - eps); the
//   running variance is updated with the unbiased variance of all ranks;
// - elementwise outputs in the input's dtype, gradients of weight and bias
//   in the weight's dtype.
// The channel dimension is dim 1, as for every batch norm.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torch_npu_ops {
namespace {

// float32 for reduced-precision floats, double for double (CUDA's accumulation type).
at::ScalarType accumulation_type(at::ScalarType type) {
  return type == at::kDouble ? at::kDouble : at::kFloat;
}

// The dimensions a batch norm reduces: all but the channels (dim 1).
std::vector<int64_t> reduced_dims(const at::Tensor& input) {
  TORCH_CHECK_VALUE(input.dim() >= 2, "SyncBatchNorm expects an input of at least 2 dimensions "
                    "(batch, channels, ...), got ", input.dim());
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) {
    dims.push_back(d);
  }
  return dims;
}

// A per-channel vector shaped to broadcast against `input` along dim 1.
at::Tensor per_channel(const at::Tensor& v, const at::Tensor& input) {
  std::vector<int64_t> shape(input.dim(), 1);
  shape[1] = input.size(1);
  return v.reshape(shape);
}

std::tuple<at::Tensor, at::Tensor> batch_norm_stats(const at::Tensor& input, double eps) {
  const at::Tensor x = input.to(accumulation_type(input.scalar_type()));
  auto [var, mean] = at::var_mean(x, reduced_dims(input), /*correction=*/0, /*keepdim=*/false);
  return {mean, at::rsqrt(var + eps)};
}

std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats_with_counts(
    const at::Tensor& /*input*/, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    double momentum, double eps, const at::Tensor& counts) {
  TORCH_CHECK_VALUE(mean.dim() == 2 && invstd.sizes() == mean.sizes(),
                    "batch_norm_gather_stats_with_counts: mean and invstd must be (ranks, channels), "
                    "got ", mean.sizes(), " and ", invstd.sizes());
  TORCH_CHECK_VALUE(counts.numel() == mean.size(0), "batch_norm_gather_stats_with_counts: one count "
                    "per rank (", mean.size(0), ") expected, got ", counts.numel());
  const at::Tensor n_r = counts.to(mean.scalar_type()).reshape({-1, 1});
  const at::Tensor n = n_r.sum();
  const at::Tensor combined_mean = (mean * n_r).sum(0) / n;
  // Each rank's squared deviations from its mean, then from the combined one.
  const at::Tensor var_r = at::reciprocal(invstd * invstd) - eps;
  const at::Tensor squares = (n_r * (var_r + at::square(mean - combined_mean))).sum(0);
  const at::Tensor combined_invstd = at::rsqrt(squares / n + eps);
  if (running_mean.has_value() && running_mean->defined()) {
    running_mean->mul_(1 - momentum).add_((combined_mean * momentum).to(running_mean->scalar_type()));
  }
  if (running_var.has_value() && running_var->defined()) {
    const at::Tensor unbiased = squares / (n - 1);
    running_var->mul_(1 - momentum).add_((unbiased * momentum).to(running_var->scalar_type()));
  }
  return {combined_mean, combined_invstd};
}

at::Tensor batch_norm_elemt(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias, const at::Tensor& mean,
                            const at::Tensor& invstd, double /*eps*/) {
  at::Tensor out = (input.to(mean.scalar_type()) - per_channel(mean, input)) * per_channel(invstd, input);
  if (weight.has_value() && weight->defined()) {
    out = out * per_channel(*weight, input);
  }
  if (bias.has_value() && bias->defined()) {
    out = out + per_channel(*bias, input);
  }
  return out.to(input.scalar_type());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_reduce(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& weight, bool input_g, bool weight_g, bool bias_g) {
  const std::vector<int64_t> dims = reduced_dims(input);
  const at::Tensor dy = grad_out.to(mean.scalar_type());
  const at::Tensor xmu = input.to(mean.scalar_type()) - per_channel(mean, input);
  const at::Tensor sum_dy = dy.sum(dims);
  const at::Tensor sum_dy_xmu = (dy * xmu).sum(dims);
  const at::ScalarType grad_type =
      weight.has_value() && weight->defined() ? weight->scalar_type() : mean.scalar_type();
  at::Tensor grad_weight;
  at::Tensor grad_bias;
  if (weight_g) {
    grad_weight = (sum_dy_xmu * invstd).to(grad_type);
  }
  if (bias_g) {
    grad_bias = sum_dy.to(grad_type);
  }
  if (!input_g) {
    return {at::Tensor(), at::Tensor(), grad_weight, grad_bias};
  }
  return {sum_dy, sum_dy_xmu, grad_weight, grad_bias};
}

at::Tensor batch_norm_backward_elemt(const at::Tensor& grad_out, const at::Tensor& input,
                                     const at::Tensor& mean, const at::Tensor& invstd,
                                     const std::optional<at::Tensor>& weight, const at::Tensor& sum_dy,
                                     const at::Tensor& sum_dy_xmu, const at::Tensor& count) {
  // The means over every rank's elements (sum_dy and sum_dy_xmu are already
  // summed over the ranks).
  const at::Tensor total = count.to(mean.scalar_type()).sum();
  const at::Tensor mean_dy = per_channel(sum_dy / total, input);
  const at::Tensor mean_dy_xmu = per_channel(sum_dy_xmu / total, input);
  const at::Tensor inv = per_channel(invstd, input);
  const at::Tensor xmu = input.to(mean.scalar_type()) - per_channel(mean, input);
  at::Tensor grad_in = (grad_out.to(mean.scalar_type()) - mean_dy - xmu * inv * inv * mean_dy_xmu) * inv;
  if (weight.has_value() && weight->defined()) {
    grad_in = grad_in * per_channel(*weight, input);
  }
  return grad_in.to(input.scalar_type());
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("batch_norm_stats", TORCH_FN(batch_norm_stats));
  m.impl("batch_norm_gather_stats_with_counts", TORCH_FN(batch_norm_gather_stats_with_counts));
  m.impl("batch_norm_elemt", TORCH_FN(batch_norm_elemt));
  m.impl("batch_norm_backward_reduce", TORCH_FN(batch_norm_backward_reduce));
  m.impl("batch_norm_backward_elemt", TORCH_FN(batch_norm_backward_elemt));
}

} // namespace torch_npu_ops
