"""Max pooling compiled for npu (Note [Max pooling of npu graphs],
_max_pool_windows.py): the pools (adaptive ones too) run as extern
kernels, their window offsets and indices as MLIR kernels, with no
NPUKernelFallbackWarning; the values and the gradients match eager npu
exactly, ties, NaN and -inf included (the gradient goes to the position
eager's forward chose), and a small CNN trains as eagerly. Adaptive average
pools (MLIR kernels forward, extern kernels backward) are compared with
eager npu too, with output sizes that do not divide the input's.

Inputs are made inside each test: npu tensors made at import stay
allocated for the whole session.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_npu.graph.compile import _mlir
from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")


def _fallbacks(run):
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run()
    return result, [str(w.message) for w in caught if issubclass(w.category, NPUKernelFallbackWarning)]


def _forward_backward(fn, x, compiled):
    x = x.detach().requires_grad_()
    out = (torch.compile(fn, dynamic=False) if compiled else fn)(x)
    grad = torch.linspace(-1, 1, out.numel(), device=x.device).view(out.shape).to(out.dtype)
    out.backward(grad)
    return out.detach(), x.grad


def _with_ties_and_nan(shape, dtype=torch.float32):
    # Small integers: most windows hold their maximum more than once.
    x = torch.randint(0, 3, shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    flat = x.view(-1)
    flat[::17] = float("nan")
    flat[5::23] = float("-inf")
    return x.to("npu")


_MAX_POOLS = {
    "max_pool1d": (lambda t: F.max_pool1d(t, 3, 2, 1), (2, 3, 11)),
    "max_pool2d": (lambda t: F.max_pool2d(t, 3, 2, 1), (2, 3, 9, 9)),
    "max_pool2d_ceil": (lambda t: F.max_pool2d(t, 2, 2, ceil_mode=True), (2, 3, 7, 7)),
    "max_pool2d_dilated": (lambda t: F.max_pool2d(t, 3, 1, 1, dilation=2), (2, 3, 8, 8)),
    "max_pool2d_large_window": (lambda t: F.max_pool2d(t, 7, 1, 3), (1, 2, 9, 9)),
    "max_pool3d": (lambda t: F.max_pool3d(t, 3, 2, 1), (2, 2, 5, 5, 5)),
    "max_pool3d_small_window": (lambda t: F.max_pool3d(t, 2, 2), (2, 2, 4, 4, 4)),
    "adaptive_max_pool1d_7_to_3": (lambda t: F.adaptive_max_pool1d(t, 3), (2, 3, 7)),
    "adaptive_max_pool2d_7_to_3": (lambda t: F.adaptive_max_pool2d(t, 3), (2, 3, 7, 7)),
    "adaptive_max_pool2d_unbatched": (lambda t: F.adaptive_max_pool2d(t, (2, 3)), (3, 7, 7)),
    "adaptive_max_pool3d_5_to_3": (lambda t: F.adaptive_max_pool3d(t, 3), (2, 2, 5, 5, 5)),
}


@needs_mlir
@pytest.mark.parametrize("name", sorted(_MAX_POOLS))
def test_max_pool_forward_backward_matches_eager_with_ties_and_nan(name):
    fn, shape = _MAX_POOLS[name]
    x = _with_ties_and_nan(shape)
    (out, grad), fallbacks = _fallbacks(lambda: _forward_backward(fn, x, compiled=True))
    assert not fallbacks, fallbacks
    want_out, want_grad = _forward_backward(fn, x, compiled=False)
    torch.testing.assert_close(out, want_out, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(grad, want_grad, rtol=0, atol=0, equal_nan=True)


@needs_mlir
def test_max_pool_bfloat16_matches_eager():
    fn = _MAX_POOLS["max_pool2d"][0]
    x = _with_ties_and_nan((2, 3, 9, 9), torch.bfloat16)
    (out, grad), fallbacks = _fallbacks(lambda: _forward_backward(fn, x, compiled=True))
    assert not fallbacks, fallbacks
    want_out, want_grad = _forward_backward(fn, x, compiled=False)
    torch.testing.assert_close(out, want_out, rtol=0, atol=0, equal_nan=True)
    # The gradient goes to the same positions; where two windows send theirs
    # to one element, the compiled backward (Inductor's scatter-add, run as
    # an extern kernel) rounds the sum in bfloat16 as eager's max-pool
    # backward may not: one unit in the last place.
    torch.testing.assert_close(grad.isnan(), want_grad.isnan())
    torch.testing.assert_close(grad, want_grad, rtol=1e-2, atol=1e-2, equal_nan=True)


_ADAPTIVE = {
    "adaptive_avg_pool2d_7_to_3": (lambda t: F.adaptive_avg_pool2d(t, 3), (2, 3, 7, 7)),
    "adaptive_avg_pool2d_8_to_4": (lambda t: F.adaptive_avg_pool2d(t, 4), (2, 3, 8, 8)),
    "adaptive_avg_pool2d_to_1": (lambda t: F.adaptive_avg_pool2d(t, 1), (2, 3, 8, 8)),
    "adaptive_avg_pool3d_7_to_3": (lambda t: F.adaptive_avg_pool3d(t, 3), (2, 2, 7, 7, 5)),
}


@needs_mlir
@pytest.mark.parametrize("name", sorted(_ADAPTIVE))
def test_adaptive_pool_forward_backward_matches_eager(name):
    fn, shape = _ADAPTIVE[name]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to("npu")
    (out, grad), fallbacks = _fallbacks(lambda: _forward_backward(fn, x, compiled=True))
    assert not fallbacks, fallbacks
    want_out, want_grad = _forward_backward(fn, x, compiled=False)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(grad, want_grad)


class _SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # Convolutions without bias, as in ResNets (a biased convolution of a
        # computed activation does not compile yet, pooling or not).
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, bias=False)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 3, 2, 1)
        x = F.adaptive_avg_pool2d(self.conv2(x), 1)
        return self.fc(torch.flatten(x, 1))


def _train(compiled: bool) -> list[float]:
    torch.manual_seed(0)
    model = _SmallCNN().to("npu")
    step_model = torch.compile(model, dynamic=False) if compiled else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(2)).to("npu")
    target = torch.tensor([1, 3, 5, 7], device="npu")
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = F.cross_entropy(step_model(data), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@needs_mlir
def test_small_cnn_trains_as_eagerly_without_fallbacks():
    losses, fallbacks = _fallbacks(lambda: _train(compiled=True))
    assert not fallbacks, fallbacks
    torch.testing.assert_close(losses, _train(compiled=False), rtol=1e-4, atol=1e-5)
