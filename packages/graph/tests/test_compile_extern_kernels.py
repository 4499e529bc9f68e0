"""Ops that run as extern kernels inside compiled npu code, between MLIR
kernels: scaled_dot_product_attention, whose backward wants its saved
logsumexp in another layout, which Inductor copies into one (Note [Layout
copies] in compile/_program.py; the copy is a kernel of its own), and
scatter-like ops (Note [Scatters run as extern kernels] in
compile/_extern_scatters.py); and computed inputs of one shape that an extern
kernel tells apart (Note [Extern kernel inputs told apart by position] in
compile/_program.py); and an extern kernel's own output, which the layout
optimization copies into channels-last or runs as a fallback of one output
(Note [Extern kernel outputs copied into another layout])."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo
import torch._inductor.config
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

from torch_npu.graph.compile import _mlir
from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")


def _attention_loss(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return (out * out).sum()


def _grads(fn, *inputs: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    loss = fn(*leaves)
    loss.backward()
    return loss.detach(), [t.grad for t in leaves]


@needs_mlir
@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_forward_and_backward_match_eager(causal):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 32, device="npu") for _ in range(3))
    expected_loss, expected_grads = _grads(lambda *t: _attention_loss(*t, causal), q, k, v)
    compiled = torch.compile(lambda *t: _attention_loss(*t, causal))
    (loss, grads), codes = run_and_get_code(_grads, compiled, q, k, v)
    torch.testing.assert_close(loss, expected_loss, atol=1e-4, rtol=1e-4)
    for grad, expected in zip(grads, expected_grads):
        torch.testing.assert_close(grad, expected, atol=1e-4, rtol=1e-4)
    backward = codes[-1]
    assert "_scaled_dot_product_flash_attention_for_cpu_backward" in backward
    assert "mlir_fused_copy_" in backward  # the logsumexp, copied into the layout it wants


def _scatters(x: torch.Tensor, idx: torch.Tensor, src: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    accumulated = torch.zeros(8, 4, device=x.device).index_put((idx,), src, accumulate=True)
    added = x.scatter_add(0, idx.unsqueeze(1).expand(-1, 4), src)
    scattered = x.scatter(0, idx.unsqueeze(1).expand(-1, 4)[:2], src[:2])
    embedded = F.embedding(idx, w)
    return accumulated * 2 + added, scattered.relu(), (embedded * embedded).sum()


@needs_mlir
def test_scatters_and_the_embedding_backward_match_eager():
    torch.manual_seed(0)
    x, src = torch.randn(8, 4, device="npu"), torch.randn(6, 4, device="npu")
    idx = torch.tensor([1, 3, 1, 7, 0, 3], device="npu")  # repeated rows accumulate
    w = torch.randn(8, 4, device="npu", requires_grad=True)
    expected = _scatters(x, idx, src, w)
    expected[2].backward()
    expected_grad, w.grad = w.grad, None
    actual, codes = run_and_get_code(torch.compile(_scatters), x, idx, src, w)
    actual[2].backward()
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w.grad, expected_grad, atol=1e-5, rtol=1e-5)
    assert "torch.ops.npu_inductor.index_put.default" in codes[0]
    assert "torch.ops.npu_inductor.scatter_add.default" in codes[0]


@needs_mlir
def test_sdpa_of_computed_query_key_value_with_a_mask_matches_eager():
    # Query, key and value computed by kernels, of one shape and dtype, and
    # a computed mask: their buffers' origins are one merged set, and each
    # is told apart by the position the attention kernel takes it at (Note
    # [Extern kernel inputs told apart by position]). A model's rotary
    # embedding and grouped-query expand make this graph; it failed with
    # "buffer ... has no aten origin".
    def attend(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        q, k, v = x.sin() * 2, x.cos() + 1, x * 3
        mask = torch.where(keep[:, None, None, :], 0.0, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    torch.manual_seed(0)
    x = torch.randn(2, 4, 7, 16, device="npu")
    keep = torch.ones(2, 7, dtype=torch.bool, device="npu")
    keep[1, :3] = False
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NPUKernelFallbackWarning)
        compiled = torch.compile(attend)(x, keep)
    torch.testing.assert_close(compiled, attend(x, keep), atol=1e-5, rtol=1e-5)


@needs_mlir
def test_convolution_backward_of_a_transposed_input_matches_eager():
    # The convolution's backward takes the output's gradient and a dense copy
    # of the transposed input, buffers of one shape with the same merged
    # origins: both were taken for the gradient (Note [Extern kernel inputs
    # told apart by position]) and the step failed to compile.
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(8, 8, 3, padding=1).npu()
    norm = torch.nn.GroupNorm(2, 8).npu()

    def loss(x: torch.Tensor) -> torch.Tensor:
        return F.silu(norm(conv(x.transpose(1, 2)))).pow(2).mean()

    x = torch.randn(4, 16, 8, device="npu")
    expected = loss(x)
    expected_grads = torch.autograd.grad(expected, [conv.weight, conv.bias])
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NPUKernelFallbackWarning)
        got = torch.compile(loss)(x)
        grads = torch.autograd.grad(got, [conv.weight, conv.bias])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    for g, e in zip(grads, expected_grads):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


def test_convolution_gradients_have_the_layout_fake_tensors_give_them():
    # Note [Convolution gradients in the layout fake tensors give them]
    # (ops, ConvolutionKernels.cpp): for a channels-last input the CPU kernel
    # lays the gradients out channels-last, where the fake-tensor rule
    # torch.compile plans with says contiguous for npu.
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = torch.randn(4, 8, 8, 8, device="npu").contiguous(memory_format=torch.channels_last)
    weight, grad_output = torch.randn(16, 8, 2, 2, device="npu"), torch.randn(4, 16, 4, 4, device="npu")
    args = ([16], [2, 2], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True])
    real = torch.ops.aten.convolution_backward(grad_output, x, weight, *args)
    with FakeTensorMode() as mode:
        fake = torch.ops.aten.convolution_backward(*(mode.from_tensor(t) for t in (grad_output, x, weight)), *args)
    assert [t.stride() for t in real] == [t.stride() for t in fake]
    expected = torch.ops.aten.convolution_backward(grad_output.cpu(), x.cpu(), weight.cpu(), *args)
    for got, want in zip(real, expected):
        torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)


@needs_mlir
def test_downsampling_convolution_of_a_permuted_input_trains_compiled():
    # ConvNeXt's downsampling layer: a convolution of a LayerNorm's permuted,
    # channels-last output. Its compiled backward stopped at Inductor's
    # stride assertion after convolution_backward.
    torch.manual_seed(0)
    norm, conv = torch.nn.LayerNorm(8).npu(), torch.nn.Conv2d(8, 16, 2, stride=2).npu()

    def loss(x: torch.Tensor) -> torch.Tensor:
        return conv(norm(x).permute(0, 3, 1, 2)).square().mean()

    x = torch.randn(4, 8, 8, 8, device="npu")
    params = [*norm.parameters(), *conv.parameters()]
    expected = loss(x)
    expected_grads = torch.autograd.grad(expected, params)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NPUKernelFallbackWarning)
        got = torch.compile(loss)(x)
        grads = torch.autograd.grad(got, params)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    for g, e in zip(grads, expected_grads):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


@needs_mlir
def test_convolution_copied_into_channels_last_trains_compiled():
    # EfficientNet's stem: a convolution of zero-padded pixels. With
    # Inductor's layout optimization, the convolution's output saved for the
    # backward is copied into channels-last, and that copy's group read the
    # extern kernel's buffer, which had no value (Note [Extern kernel outputs
    # copied into another layout]): the step failed to compile.
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8, device="npu")
    weight = torch.randn(4, 3, 3, 3, device="npu")

    def loss(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.conv2d(F.pad(x, (0, 1, 0, 1)), weight, stride=2).sin().sum()

    expected_weight = weight.clone().requires_grad_()
    expected = loss(x, expected_weight)
    (expected_grad,) = torch.autograd.grad(expected, [expected_weight])
    torch._dynamo.reset()
    compiled_weight = weight.clone().requires_grad_()
    with torch._inductor.config.patch(force_layout_optimization=True), warnings.catch_warnings():
        warnings.simplefilter("error", NPUKernelFallbackWarning)
        got = torch.compile(loss)(x, compiled_weight)
        (grad,) = torch.autograd.grad(got, [compiled_weight])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grad, expected_grad, atol=1e-5, rtol=1e-5)


@needs_mlir
def test_squeeze_and_excitation_convolutions_train_compiled():
    # EfficientNet's squeeze-and-excitation: convolutions of a pooled
    # [N, C, 1, 1] value, which Inductor's layout optimization runs as
    # fallback kernels of one output (MultiOutput); the silu between them
    # read that output, which had no value (Note [Extern kernel outputs
    # copied into another layout]): the step failed to compile.
    torch.manual_seed(0)
    x = torch.randn(2, 4, 8, 8, device="npu")
    params = [torch.randn(2, 4, 1, 1), torch.randn(2), torch.randn(4, 2, 1, 1), torch.randn(4)]

    def loss(x, reduce_w, reduce_b, expand_w, expand_b):
        squeezed = F.silu(F.conv2d(F.adaptive_avg_pool2d(x, 1), reduce_w, reduce_b))
        return (x * torch.sigmoid(F.conv2d(squeezed, expand_w, expand_b))).sin().sum()

    expected_params = [p.to("npu").requires_grad_() for p in params]
    expected = loss(x, *expected_params)
    expected_grads = torch.autograd.grad(expected, expected_params)
    torch._dynamo.reset()
    compiled_params = [p.to("npu").requires_grad_() for p in params]
    with torch._inductor.config.patch(force_layout_optimization=True), warnings.catch_warnings():
        warnings.simplefilter("error", NPUKernelFallbackWarning)
        got = torch.compile(loss)(x, *compiled_params)
        grads = torch.autograd.grad(got, compiled_params)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    for g, e in zip(grads, expected_grads):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)
