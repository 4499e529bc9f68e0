// The fused RNN-cell kernels that PyTorch's LSTM and GRU cells call on every
// device but the CPU (_thnn_fused_lstm_cell, _thnn_fused_gru_cell and their
// backward kernels). The CPU has no kernel for them (it computes the cells
// from separate ops), so the generic executor cannot run them: nn.LSTM,
// nn.GRU and their cells failed at the first synchronization.
//
// They are composed here from ATen ops (each one device work on npu), with
// the cell equations of the unfused CPU cells; the forward keeps what its
// backward needs in the workspace, as the fused kernels do:
//   LSTM: workspace = [i, f, g, o], the activated gates (batch, 4 * hidden);
//   GRU:  workspace = [r, z, n, hx, hn] (batch, 5 * hidden), hn being the
//         hidden part of the new gate before r scales it.
// Both forward and backward are ours, so the layout is a contract between
// the two functions below only. As CUDA's fused kernels do, reduced-precision
// cells compute in float32 and round only their results (the workspace
// stays float32).
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

namespace torch_npu_ops {
namespace {

using at::Tensor;

// The dtype the cell computes in: float32 for float16 and bfloat16.
c10::ScalarType compute_type(const Tensor& t) {
  return at::toOpMathType(t.scalar_type());
}

Tensor with_bias(const Tensor& gates, const std::optional<Tensor>& bias) {
  return bias.has_value() && bias->defined() ? gates + bias->to(gates.scalar_type()) : gates;
}

std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell(
    const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& cx,
    const std::optional<Tensor>& input_bias, const std::optional<Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.dim() == 2 && input_gates.sizes() == hidden_gates.sizes() && input_gates.size(1) % 4 == 0,
              "_thnn_fused_lstm_cell: expected gates of shape (batch, 4 * hidden), got ", input_gates.sizes(),
              " and ", hidden_gates.sizes());
  const auto type = compute_type(input_gates);
  const Tensor gates = with_bias(with_bias(input_gates.to(type), input_bias) + hidden_gates.to(type), hidden_bias);
  auto chunks = gates.chunk(4, 1);
  const Tensor i = chunks[0].sigmoid();
  const Tensor f = chunks[1].sigmoid();
  const Tensor g = chunks[2].tanh();
  const Tensor o = chunks[3].sigmoid();
  const Tensor cy = f * cx.to(type) + i * g;
  const Tensor hy = o * cy.tanh();
  return {hy.to(input_gates.scalar_type()), cy.to(cx.scalar_type()), at::cat({i, f, g, o}, 1)};
}

std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell_backward(
    const std::optional<Tensor>& grad_hy, const std::optional<Tensor>& grad_cy, const Tensor& cx,
    const Tensor& cy, const Tensor& workspace, bool has_bias) {
  const auto type = workspace.scalar_type();
  auto gates = workspace.chunk(4, 1);
  const Tensor& i = gates[0];
  const Tensor& f = gates[1];
  const Tensor& g = gates[2];
  const Tensor& o = gates[3];
  const Tensor tanh_cy = cy.to(type).tanh();
  const bool have_hy = grad_hy.has_value() && grad_hy->defined();
  const bool have_cy = grad_cy.has_value() && grad_cy->defined();
  const Tensor ghy = have_hy ? grad_hy->to(type) : at::zeros_like(tanh_cy);
  // d(loss)/d(cy): through hy = o * tanh(cy), plus what comes in directly.
  Tensor gcy = ghy * o * (1 - tanh_cy * tanh_cy);
  if (have_cy) {
    gcy = gcy + grad_cy->to(type);
  }
  const Tensor gi = gcy * g * i * (1 - i);
  const Tensor gf = gcy * cx.to(type) * f * (1 - f);
  const Tensor gg = gcy * i * (1 - g * g);
  const Tensor go = ghy * tanh_cy * o * (1 - o);
  const auto out_type = cx.scalar_type();
  Tensor grad_gates = at::cat({gi, gf, gg, go}, 1).to(out_type);
  Tensor grad_cx = (gcy * f).to(out_type);
  Tensor grad_bias = has_bias ? grad_gates.sum(0, /*keepdim=*/false) : Tensor();
  return {std::move(grad_gates), std::move(grad_cx), std::move(grad_bias)};
}

std::tuple<Tensor, Tensor> fused_gru_cell(
    const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& hx,
    const std::optional<Tensor>& input_bias, const std::optional<Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.dim() == 2 && input_gates.sizes() == hidden_gates.sizes() && input_gates.size(1) % 3 == 0,
              "_thnn_fused_gru_cell: expected gates of shape (batch, 3 * hidden), got ", input_gates.sizes(),
              " and ", hidden_gates.sizes());
  const auto type = compute_type(input_gates);
  auto in = with_bias(input_gates.to(type), input_bias).chunk(3, 1);
  auto hid = with_bias(hidden_gates.to(type), hidden_bias).chunk(3, 1);
  const Tensor h = hx.to(type);
  const Tensor r = (in[0] + hid[0]).sigmoid();
  const Tensor z = (in[1] + hid[1]).sigmoid();
  const Tensor& hn = hid[2];
  const Tensor n = (in[2] + r * hn).tanh();
  const Tensor hy = n + z * (h - n);
  return {hy.to(hx.scalar_type()), at::cat({r, z, n, h, hn}, 1)};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> fused_gru_cell_backward(
    const Tensor& grad_hy, const Tensor& workspace, bool has_bias) {
  auto parts = workspace.chunk(5, 1);
  const Tensor& r = parts[0];
  const Tensor& z = parts[1];
  const Tensor& n = parts[2];
  const Tensor& hx = parts[3];
  const Tensor& hn = parts[4];
  // hy = (1 - z) * n + z * hx
  const Tensor ghy = grad_hy.to(workspace.scalar_type());
  const auto out_type = grad_hy.scalar_type();
  Tensor grad_hx = (ghy * z).to(out_type);
  const Tensor gn = ghy * (1 - z) * (1 - n * n);        // before tanh
  const Tensor gz = ghy * (hx - n) * z * (1 - z);       // before sigmoid
  const Tensor gr = gn * hn * r * (1 - r);              // before sigmoid
  Tensor grad_input_gates = at::cat({gr, gz, gn}, 1).to(out_type);
  Tensor grad_hidden_gates = at::cat({gr, gz, gn * r}, 1).to(out_type);
  Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : Tensor();
  Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : Tensor();
  return {std::move(grad_input_gates), std::move(grad_hidden_gates), std::move(grad_hx),
          std::move(grad_input_bias), std::move(grad_hidden_bias)};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}

} // namespace torch_npu_ops
