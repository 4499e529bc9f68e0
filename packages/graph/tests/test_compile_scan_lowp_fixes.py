"""Minimal cases of what the float16, bfloat16 and int64 runs of the wide
compiled OpInfo scan (test_compile_opinfo_full.py) found, each compiled and
compared with eager npu:

- native_layer_norm's saved mean and inverse standard deviation are of the
  input's dtype, as eager npu (the CPU kernel) gives them; the compiled
  graph gave float32 statistics of float16 and bfloat16 inputs (the CUDA
  dtype), silently (Note [Layer norm statistics as eager npu gives them]);
- sums, means, variances and average pools of float16 and bfloat16
  accumulate in float32, as eager does; the program accumulated in the half
  type (4096 bfloat16 ones summed to 256; var and avg_pool2d of the scan's
  bfloat16 samples were 2% and 4% off), silently (Note [Half-precision
  reductions accumulate in float32]);
- every step of mean, var and var_mean (the sums, the mean, the
  differences, their squares) of float16 and bfloat16 is computed in
  float32, as eager computes them; the sum of squares of 4096 float16
  values in [-9, 9] overflowed (var gave inf), and the mean of bfloat16
  values alternating between 256 and 258, rounded before the differences,
  made their variance 2 instead of 1, silently (same Note);
- lerp of float16 and bfloat16 is computed in float32, as eager computes it;
  Inductor's decomposition rounded ``end - start`` to the half type (lerp
  of 40000 and -40000 by 0.3 gave inf for 16000), silently (Note
  [Half-precision pointwise work in float32]);
- index_put with a CPU bool mask (a sample of the scan, float16 and
  float32 alike) raised: the kernel refused any CPU tensor but a scalar;
  the mask is copied to the device as a scalar is (Note [Host scalars a
  kernel reads]), and the kernel (which MLIR does not compile) runs
  eagerly with the fallback warning;
- one_hot of a 0-d int64 tensor compiles: the group of its dropped class
  checks has no output, and its program ("return (,)") did not parse.

Inputs are made inside each test: npu tensors made at import stay
allocated for the whole session.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

from torch_npu.graph.compile import _mlir
from _mlir_only import compiled_as_mlir

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")


def _layer_norm_inputs(dtype: torch.dtype) -> list[torch.Tensor]:
    # The scan's sample: a [1, 2, 3] input normalised over all of it.
    x = torch.tensor([[[-4.3672, -7.0391, -6.8438], [-8.3594, 3.7168, -0.9805]]])
    weight = torch.linspace(-1.5, 2.0, 6).reshape(1, 2, 3)
    bias = torch.linspace(0.5, -0.75, 6).reshape(1, 2, 3)
    return [t.to(dtype).to("npu") for t in (x, weight, bias)]


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_native_layer_norm_statistics_as_eager(dtype: torch.dtype) -> None:
    def fn(x, weight, bias):
        return torch.native_layer_norm(x, (1, 2, 3), weight, bias, 1e-5)

    inputs = _layer_norm_inputs(dtype)
    expected = fn(*inputs)
    torch._dynamo.reset()
    actual = torch.compile(fn, dynamic=False)(*inputs)
    assert [(t.shape, t.dtype) for t in actual] == [(t.shape, t.dtype) for t in expected]
    assert actual[1].dtype == dtype and actual[2].dtype == dtype
    tolerance = 1.6e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-5
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)


@needs_mlir
def test_layer_norm_gradients_with_half_statistics() -> None:
    # The backward reads the saved statistics, now float16: it still
    # compiles and agrees with eager npu.
    def fn(x, weight, bias):
        out = F.layer_norm(x, (3,), weight, bias)
        return torch.autograd.grad(out.float().pow(2).sum(), (x, weight, bias))

    x, weight, bias = _layer_norm_inputs(torch.float16)
    inputs = [x, weight.reshape(-1)[:3].clone(), bias.reshape(-1)[:3].clone()]
    for t in inputs:
        t.requires_grad_(True)
    expected = fn(*inputs)
    torch._dynamo.reset()
    actual = torch.compile(fn, dynamic=False)(*inputs)
    assert [t.dtype for t in actual] == [t.dtype for t in expected]
    torch.testing.assert_close(actual, expected, atol=2e-2, rtol=2e-2)


def _compiled_and_eager(fn, *inputs):
    expected = fn(*inputs)
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False)(*inputs), expected


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_sums_accumulate_in_float32(dtype: torch.dtype) -> None:
    ones = torch.ones(4096, dtype=dtype).to("npu")
    actual, expected = _compiled_and_eager(lambda x: (x.sum(), (x * 3).sum(), x.cumsum(0)[-1]), ones)
    assert [t.item() for t in expected] == [4096.0, 12288.0, 4096.0]
    assert [t.dtype for t in actual] == [dtype] * 3
    torch.testing.assert_close(actual, expected, atol=0.0, rtol=0.0)


def _scan_values(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    # Values in [-9, 9] as OpInfo's samples make them, not exact in dtype.
    count = math.prod(shape)
    return (torch.sin(torch.arange(count, dtype=torch.float64) * 1.7) * 9).reshape(shape).to(dtype).to("npu")


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_variance_and_average_pool_as_eager(dtype: torch.dtype) -> None:
    # Values around 5 (var: a sum of squares far above each square, below
    # float16's largest value) and
    # around 60 in 8 x 8 windows (avg_pool2d: window sums far above each
    # value), where sums in the half type lose most digits.
    x = _scan_values(dtype, 16, 32) + 5
    actual, expected = _compiled_and_eager(lambda x: (torch.var(x), torch.var_mean(x, 1), torch.masked.var(x)), x)
    torch.testing.assert_close(actual, expected, atol=1.6e-2, rtol=1.6e-2)
    images = _scan_values(dtype, 1, 3, 16, 16) + 60
    actual, expected = _compiled_and_eager(lambda x: F.avg_pool2d(x, 8, 4), images)
    torch.testing.assert_close(actual, expected, atol=1.6e-2, rtol=1.6e-2)


def _compiled_without_fallback(fn, *inputs):
    """``fn`` compiled and run on ``inputs``, and eagerly; fails if a
    kernel fell back to eager."""
    expected = fn(*inputs)
    return compiled_as_mlir(fn, *inputs), expected


def _assert_near_float64(actual, fn, inputs, dtype: torch.dtype) -> None:
    """``actual`` is within ``dtype``'s tolerance of ``fn`` computed in
    float64 on CPU from the same (half-precision) inputs."""
    reference = fn(*[t.cpu().to(torch.float64) for t in inputs])
    actual = [actual] if isinstance(actual, torch.Tensor) else list(actual)
    reference = [reference] if isinstance(reference, torch.Tensor) else list(reference)
    tolerance = 1e-3 if dtype == torch.float16 else 1.6e-2
    assert all(t.dtype == dtype and bool(torch.isfinite(t).all()) for t in actual)
    torch.testing.assert_close([t.cpu().to(torch.float64) for t in actual], reference, atol=1e-5, rtol=tolerance)


def _variances(x):
    return torch.var(x, 1), *torch.var_mean(x, 1, correction=0, keepdim=True), torch.var(x)


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_variance_steps_in_float32(dtype: torch.dtype) -> None:
    # Rows of 4096 values in [-9, 9]: their sum of squares (about 1.6e5)
    # exceeds float16's largest value, their variance (about 40) does not.
    x = _scan_values(dtype, 4, 4096)
    actual, expected = _compiled_without_fallback(_variances, x)
    assert all(bool(torch.isfinite(t).all()) for t in expected)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1.6e-2)
    _assert_near_float64(actual, _variances, [x], dtype)


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_variance_of_large_differences(dtype: torch.dtype) -> None:
    # A few values of +-400 among small ones: the squares of their
    # differences from the mean exceed 65504, the variance does not.
    x = (_scan_values(torch.float32, 4, 4096) * 0.1).cpu()
    x[:, ::512] = 400.0
    x[:, 7::512] = -380.0
    x = x.to(dtype).to("npu")
    actual, expected = _compiled_without_fallback(_variances, x)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1.6e-2)
    _assert_near_float64(actual, _variances, [x], dtype)


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_mean_and_variance_of_offset_values(dtype: torch.dtype) -> None:
    # Values alternating between 256 and 258: their mean, 257, is not a
    # bfloat16 value; and values near 2048, whose float16 row sums overflow.
    alternating = torch.full((4, 4096), 256.0)
    alternating[:, 1::2] = 258.0
    alternating = alternating.to(dtype).to("npu")

    def fn(x):
        return torch.var(x, 1), x.mean(1)

    actual, expected = _compiled_without_fallback(fn, alternating)
    torch.testing.assert_close(actual[0].cpu().float(), torch.full((4,), 4096 / 4095), atol=0.0, rtol=1.6e-2)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1.6e-2)
    near_2048 = _scan_values(dtype, 4, 4096) + 2048
    actual, expected = _compiled_without_fallback(lambda x: x.mean(1), near_2048)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-3)
    _assert_near_float64(actual, lambda x: x.mean(1), [near_2048], dtype)


@needs_mlir
def test_half_variance_gradient_of_offset_values() -> None:
    # var's backward subtracts the mean (a mean over the row, spelled out
    # by the post-grad pass): its float16 row sums of values near 2048
    # overflowed, and every gradient was NaN.
    x = (_scan_values(torch.float16, 4, 4096) + 2048).requires_grad_(True)

    def fn(x):
        return torch.autograd.grad(torch.var(x, 1).sum(), x)[0]

    actual, expected = _compiled_without_fallback(fn, x)
    assert bool(torch.isfinite(actual).all())
    torch.testing.assert_close(actual, expected, atol=1e-3, rtol=1e-3)


def _lerps(start, end, weight):
    return torch.lerp(start, end, 0.3), torch.lerp(start, end, 0.8), torch.lerp(start, end, weight)


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_lerp_in_float32(dtype: torch.dtype) -> None:
    # start and end of opposite signs whose difference exceeds 65504 (the
    # results do not), and a weight tensor in [0.1, 0.9] (both formulas).
    start = _scan_values(dtype, 4, 256) * 4000
    end = -start
    weight = (_scan_values(torch.float32, 4, 256) * (0.4 / 9) + 0.5).to(dtype)
    actual, expected = _compiled_without_fallback(_lerps, start, end, weight)
    assert all(bool(torch.isfinite(t).all()) for t in expected)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1.6e-2)
    _assert_near_float64(actual, _lerps, [start, end, weight], dtype)


@needs_mlir
def test_one_hot_of_a_0d_tensor() -> None:
    actual, expected = _compiled_and_eager(lambda x: F.one_hot(x, num_classes=10), torch.tensor(4).to("npu"))
    assert actual.dtype == torch.int64 and actual.shape == (10,)
    assert torch.equal(actual.cpu(), expected.cpu())


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_index_put_with_a_cpu_mask(dtype: torch.dtype) -> None:
    # The scan's sample: index_put of npu values at the rows a CPU bool
    # mask selects (eager npu accepts a CPU index, as eager CUDA does); the
    # kernel refused the mask as a CPU tensor that is not a scalar (Note
    # [Host scalars a kernel reads]).
    x = torch.arange(10.0).reshape(5, 2).to(dtype).to("npu")
    mask = torch.tensor([True, True, False, True, False])
    values = torch.tensor([-0.4194, -6.1992]).to(dtype).to("npu")

    def fn(x, mask, values):
        return torch.index_put(x, (mask,), values)

    expected = fn(x, mask, values)
    torch._dynamo.reset()
    actual = torch.compile(fn, dynamic=False)(x, mask, values)
    assert mask.device.type == "cpu"
    assert torch.equal(actual.cpu(), expected.cpu())
    assert torch.equal(actual[2].cpu(), torch.tensor([4.0, 5.0], dtype=dtype))
