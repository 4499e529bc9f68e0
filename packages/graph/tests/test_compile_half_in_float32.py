"""Compiled float16 and bfloat16 pointwise chains are computed in float32
and rounded once where a kernel stores them, as Inductor's own code
generation does (Note [Half-precision pointwise work in float32]):

- a compiled float16 ``addcdiv(a, b, c, value=v)`` whose quotient ``b / c``
  exceeds 65504 where ``v * b / c`` does not was inf (Dynamo splits it into
  div, mul and add, each rounded to float16), silently: eager npu computes
  it in float32 and gives the finite value;
- a chain ``(x * 1000) * (y / 1000)`` of float16 whose intermediate
  overflows gives the finite product (eager npu rounds each op and gives
  inf: there the compiled result is the float64 reference's, not eager's);
- a bfloat16 chain of 16 ops rounded 16 times lost several of bfloat16's 8
  significant bits (5% off float64); rounded once it is within one
  rounding of float64;
- an explicit ``.half()`` of a float32 value in the middle still rounds, as
  the user asked and eager gives.

Each case is compared with a float64 CPU reference computed from the same
half-precision inputs, and with eager npu; no kernel may fall back to eager.
Inputs are made inside each test: npu tensors made at import stay
allocated for the whole session.
"""

from __future__ import annotations

import pytest
import torch

from torch_npu.graph.compile import _mlir
from _mlir_only import compiled_as_mlir

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")


def _values(dtype: torch.dtype, count: int, low: float, high: float) -> torch.Tensor:
    """``count`` values spread over [low, high], of ``dtype``, on npu (not
    random: the same values in every run)."""
    position = (torch.sin(torch.arange(count, dtype=torch.float64) * 1.7) + 1) / 2
    return (low + position * (high - low)).to(dtype).to("npu")


def _float64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().cpu().to(torch.float64)


def _relative_error(actual: torch.Tensor, reference: torch.Tensor) -> float:
    return float(((_float64(actual) - reference).abs() / reference.abs()).max())


@needs_mlir
def test_float16_addcdiv_with_a_quotient_beyond_float16() -> None:
    # b / c is up to 2.4e5 (float16's largest value is 65504), value * b / c
    # at most 240.
    a = _values(torch.float16, 1024, -8.0, 8.0)
    b = _values(torch.float16, 1024, 2.0e4, 3.0e4)
    c = _values(torch.float16, 1024, 0.125, 0.25).flip(0)

    def fn(a, b, c):
        return torch.addcdiv(a, b, c, value=1e-3)

    expected = fn(a, b, c)
    actual = compiled_as_mlir(fn, a, b, c)
    reference = _float64(a) + 1e-3 * (_float64(b) / _float64(c))
    assert bool((_float64(b) / _float64(c) > 65504).any())
    assert actual.dtype == torch.float16
    assert bool(torch.isfinite(actual).all()) and bool(torch.isfinite(expected).all())
    # one rounding of float16 (2^-11 relative) from float64, as eager
    assert _relative_error(actual, reference) <= 2.0 ** -11
    torch.testing.assert_close(actual, expected, atol=1e-3, rtol=1e-3)


@needs_mlir
def test_float16_chain_with_an_overflowing_intermediate() -> None:
    # x * 1000 is up to 2e5, y / 1000 at most 0.01: their product is below
    # 2000.
    x = _values(torch.float16, 1024, 50.0, 200.0)
    y = _values(torch.float16, 1024, 1.0, 10.0).flip(0)

    def fn(x, y):
        return (x * 1000) * (y / 1000)

    expected = fn(x, y)
    actual = compiled_as_mlir(fn, x, y)
    reference = (_float64(x) * 1000) * (_float64(y) / 1000)
    assert actual.dtype == torch.float16 and bool(torch.isfinite(actual).all())
    assert _relative_error(actual, reference) <= 2.0 ** -11
    # eager npu rounds x * 1000 to float16 (inf beyond 65504): the compiled
    # chain is float64's, as Inductor's kernels are, not eager's.
    finite = torch.isfinite(expected)
    assert not bool(finite.all())
    torch.testing.assert_close(actual[finite], expected[finite], atol=1e-3, rtol=2e-3)


def _steps(x):
    for _ in range(8):
        x = x * 1.1 - 0.05
    return x


@needs_mlir
def test_bfloat16_chain_rounds_once() -> None:
    x = _values(torch.bfloat16, 4096, 0.5, 4.0)
    expected = _steps(x)
    actual = compiled_as_mlir(_steps, x)
    reference = _steps(_float64(x))
    assert actual.dtype == torch.bfloat16
    # One rounding of bfloat16 (8 significant bits) is at most 2^-8
    # relative; sixteen of them (eager npu's, and the old program's) are
    # several times that.
    assert _relative_error(actual, reference) <= 2.0 ** -8
    assert _relative_error(expected, reference) > 4 * 2.0 ** -8
    # eager npu is up to 6% off float64 here: the compiled chain agrees
    # with it within that, and is the closer of the two everywhere but ties.
    torch.testing.assert_close(actual, expected, atol=0.0, rtol=0.08)
    closer = (_float64(actual) - reference).abs() <= (_float64(expected) - reference).abs()
    assert float(closer.double().mean()) > 0.9


def _with_explicit_cast(x, y):
    q = (x * 3.0).half()  # the user's rounding, kept
    return q.float() - x * 3.0, (q * 1000) * (y / 1000)


@needs_mlir
def test_explicit_half_cast_in_the_middle_still_rounds() -> None:
    x = _values(torch.float32, 1024, 20.0, 60.0)
    y = _values(torch.float16, 1024, 1.0, 10.0).flip(0)
    expected = _with_explicit_cast(x, y)
    actual = compiled_as_mlir(_with_explicit_cast, x, y)
    assert [t.dtype for t in actual] == [torch.float32, torch.float16]
    # The rounding error of the explicit cast is eager's, bit for bit (and
    # not 0: x * 3.0 is not a float16 number).
    assert torch.equal(actual[0].cpu(), expected[0].cpu())
    assert bool((actual[0] != 0).any())
    # q * 1000 overflows float16; the chain after the cast is one rounding
    # of its float64 value (q is the rounded value, as the user asked).
    q = (x * 3.0).half()
    reference = (_float64(q) * 1000) * (_float64(y) / 1000)
    assert bool(torch.isfinite(actual[1]).all())
    assert _relative_error(actual[1], reference) <= 2.0 ** -11
    finite = torch.isfinite(expected[1])
    assert not bool(finite.all())  # eager npu rounds q * 1000 to float16
    torch.testing.assert_close(actual[1][finite], expected[1][finite], atol=1e-3, rtol=2e-3)
