"""Ops a wide OpInfo scan found torch.compile on npu failing on (issue 19),
each compiled and compared with eager npu, forward and backward:

- lowerings that realize a buffer of no FX node (cumsum of bools in
  cumprod's backward, a cat in prod's) or return a value that reads none of
  its op's inputs (adaptive_max_pool3d's indices over one-element windows),
  and the backward of avg_pool2d / avg_pool3d, whose lowering Inductor fails
  on: extern kernels (Note [Lowerings that are not aten programs run as
  extern kernels]);
- index values Inductor inlines from no tensor (the interpolations' source
  positions; Note [Index values computed from no tensor]);
- the contiguous copy Inductor makes of an extern kernel's input (the
  adaptive poolings' backward; _program._extern_input_origin);
- tensors without elements (Note [Empty values a group does not read],
  Note [Kernels over tensors without elements]).
"""

from __future__ import annotations

import warnings
from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

from torch_npu.graph.compile import _mlir
from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

pytestmark = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")


def _values(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    # Distinct, nonzero, of mixed sign and not in order: a wrong window,
    # row or weight shows.
    n = torch.Size(shape).numel()
    ramp = (torch.arange(n, dtype=torch.float64) * 0.7).remainder(5.0) - 2.3
    return ramp.reshape(shape).to(dtype).to("npu")


def _compiled(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    compiled = torch.compile(fn, dynamic=False)

    def run(*args: torch.Tensor) -> torch.Tensor:
        with warnings.catch_warnings():
            # A kernel MLIR cannot build runs its aten ops eagerly (with
            # the fallback warning): its results still count.
            warnings.simplefilter("ignore")
            return compiled(*args)

    return run


def _weighted_by_position(y: torch.Tensor) -> torch.Tensor:
    # Weights that differ per element, computed in the compiled graph as
    # the OpInfo scan did: index arithmetic (iota, remainder) fused with the
    # op under test, and a backward that is not all ones.
    return y * (torch.arange(y.numel(), device=y.device).reshape(y.shape) % 7 + 1)


def _check_forward_and_backward(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> None:
    """fn, its result weighted by position, compiled matches eager npu, and
    so does the gradient of the sum of that result."""
    torch._dynamo.reset()

    def weighted(x: torch.Tensor) -> torch.Tensor:
        return _weighted_by_position(fn(x))

    leaf = x.detach().requires_grad_()
    expected = weighted(leaf)
    (expected_grad,) = torch.autograd.grad(expected.sum(), leaf)

    leaf = x.detach().requires_grad_()
    actual = _compiled(weighted)(leaf)
    (actual_grad,) = torch.autograd.grad(actual.sum(), leaf)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(actual_grad, expected_grad, atol=1e-4, rtol=1e-4)


# Inputs are made when a test runs: npu tensors made at import would stay
# allocated for the whole session (pytest imports every test module before
# running any), and the allocator tests that run first see them.
_CASES = {
    # cumprod's backward has a branch for zeros: the input has one.
    "cumprod": (lambda x: torch.cumprod(x, 1), lambda: _values(3, 6) * (_values(3, 6) > -2.0)),
    "masked_cumprod": (lambda x: torch.masked.cumprod(x, 1, mask=_values(3, 6) > -1.5), lambda: _values(3, 6)),
    "prod": (lambda x: torch.prod(x, 1), lambda: _values(3, 5)),
    "prod_all": (lambda x: torch.prod(x), lambda: _values(2, 3)),
    "roll": (lambda x: torch.roll(x, (1, -2), (0, 2)), lambda: _values(3, 4, 5)),
    "adaptive_avg_pool1d": (lambda x: F.adaptive_avg_pool1d(x, 3), lambda: _values(2, 3, 7)),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (5, 3)), lambda: _values(1, 2, 8, 7)),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), lambda: _values(1, 2, 5, 6, 4)),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 3, 1, padding=1, ceil_mode=True, count_include_pad=False),
                   lambda: _values(1, 3, 9)),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, count_include_pad=False),
                   lambda: _values(1, 2, 7, 8)),
    # Inductor's own lowering of this backward fails on any device.
    "avg_pool2d_divisor": (lambda x: F.avg_pool2d(x, 3, 1, 1, True, False, divisor_override=2), lambda: _values(1, 3, 9, 9)),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2, 1), lambda: _values(1, 2, 4, 3, 5)),
    "interpolate_area": (lambda x: F.interpolate(x, size=(3, 5), mode="area"), lambda: _values(1, 2, 7, 9)),
    "interpolate_bilinear": (lambda x: F.interpolate(x, scale_factor=1.7, mode="bilinear"), lambda: _values(1, 2, 4, 5)),
    "interpolate_linear": (lambda x: F.interpolate(x, size=7, mode="linear", align_corners=True), lambda: _values(2, 3, 4)),
    "interpolate_nearest": (lambda x: F.interpolate(x, size=7, mode="nearest"), lambda: _values(2, 2, 3)),
    "interpolate_nearest_exact": (lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest-exact"),
                                  lambda: _values(1, 2, 4, 3)),
    "interpolate_nearest_exact_1d": (lambda x: F.interpolate(x, size=3, mode="nearest-exact"), lambda: _values(2, 3, 4)),
    "interpolate_trilinear": (lambda x: F.interpolate(x, size=(3, 4, 5), mode="trilinear"), lambda: _values(1, 1, 2, 3, 3)),
    "upsample_bilinear": (lambda x: F.upsample_bilinear(x, scale_factor=2), lambda: _values(1, 2, 3, 4)),
    "upsample_nearest": (lambda x: F.upsample_nearest(x, scale_factor=2), lambda: _values(1, 2, 3, 4)),
    "local_response_norm": (lambda x: F.local_response_norm(x, 2, alpha=3e-5, beta=0.5, k=1.25), lambda: _values(1, 6, 3)),
    "pad_circular": (lambda x: F.pad(x, (1, 2, 2, 1), mode="circular"), lambda: _values(1, 2, 4, 5)),
    "pad_circular_empty_batch": (lambda x: F.pad(x, (1, 2), mode="circular"), lambda: _values(0, 3, 3)),
    "pdist": (lambda x: F.pdist(x), lambda: _values(5, 3)),
    "unfold": (lambda x: F.unfold(x, (2, 3), dilation=1, padding=1, stride=2), lambda: _values(2, 2, 5, 6)),
    "tensor_unfold": (lambda x: x.unfold(1, 3, 2), lambda: _values(2, 8)),
    # A batch without elements: nothing to compute, and torch-mlir died of
    # a floating point exception on the backward's kernel.
    "unfold_empty_batch": (lambda x: F.unfold(x, 2), lambda: _values(0, 1, 5, 5)),
    "roll_empty": (lambda x: torch.roll(x, 1, 0), lambda: _values(0, 0, 3)),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_forward_and_backward_compile(case):
    fn, make_input = _CASES[case]
    x = make_input()
    _check_forward_and_backward(fn, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("output_size", [(2, 3, 4), (1, 2, 1)])
def test_adaptive_max_pool3d(dtype, output_size):
    # Output (2, 3, 4) of a (2, 3, 4) input: windows of one element, whose
    # argmax Inductor computes as the constant 0 without reading the input.
    torch._dynamo.reset()
    x = _values(2, 2, 3, 4, dtype=dtype)

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return F.adaptive_max_pool3d(x, output_size, return_indices=True)

    expected = fn(x)
    actual = _compiled(fn)(x)
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)


def test_stft():
    torch._dynamo.reset()
    x = _values(2, 40)
    window = torch.hann_window(8, device="npu")

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.stft(x, 8, hop_length=3, window=window, return_complex=True))

    torch.testing.assert_close(_compiled(fn)(x), fn(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("op", [torch.isinf, torch.isnan, torch.isfinite])
def test_float_classes_of_integers(op):
    torch._dynamo.reset()
    x = torch.tensor([[0, -3, 7], [2**62, -(2**62), 1]], device="npu")

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return op(x), op(x * 2)

    torch.testing.assert_close(_compiled(fn)(x), fn(x))


def test_lowering_of_no_aten_op_runs_the_aten_op():
    # Inductor lowers interpolate's area backward (adaptive_avg_pool2d's)
    # to a buffer of its own: the compiled backward calls the aten op as an
    # extern kernel instead of failing.
    torch._dynamo.reset()
    x = _values(1, 2, 7, 9).requires_grad_()

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = F.interpolate(x, size=(3, 5), mode="area")
        return torch.autograd.grad(y.sum(), x)[0]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual, codes = run_and_get_code(torch.compile(fn, dynamic=False), x)
    torch.testing.assert_close(actual, fn(x))
    assert any("aten._adaptive_avg_pool2d_backward" in code for code in codes), codes


@pytest.mark.parametrize("case", ["local_response_norm", "pad_circular_empty_batch", "roll_empty", "unfold_empty_batch"])
def test_gradient_computed_in_the_compiled_graph(case):
    # As the OpInfo scan compiled them: forward, weights and autograd.grad
    # in one compiled function, so the backward's graph holds the weights'
    # index arithmetic too.
    fn, make_input = _CASES[case]
    x = make_input()
    torch._dynamo.reset()

    def gradient(x: torch.Tensor) -> torch.Tensor:
        return torch.autograd.grad(_weighted_by_position(fn(x)).sum(), x)[0]

    expected = gradient(x.detach().requires_grad_())
    actual = _compiled(gradient)(x.detach().requires_grad_())
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


def test_biased_convolution_after_an_activation_is_one_extern_kernel():
    # Inductor lowers a convolution with a bias to its extern convolution
    # without it plus a loop adding the bias, named after the convolution:
    # that loop's program computed the convolution again, and failed to
    # compile where its input was an activation of the graph. The op now
    # runs as one extern kernel, and no MLIR program computes a convolution.
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(8, 4)).npu()
    x = _values(4, 3, 16, 16)

    def loss_and_grads(model: Callable[[torch.Tensor], torch.Tensor]) -> tuple[torch.Tensor, ...]:
        loss = model(x).pow(2).mean()
        return (loss, *torch.autograd.grad(loss, [net[0].weight, net[3].weight, net[3].bias]))

    expected = loss_and_grads(net)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NPUKernelFallbackWarning)
        actual, codes = run_and_get_code(loss_and_grads, torch.compile(net))
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)
    assert not any("MLIRKernel(" in line and "convolution" in line for code in codes for line in code.splitlines())
