"""Compiled math on npu agrees with eager npu over each op's whole domain.

Each float unary op Inductor lowers (and the clamps, whose NaN handling
differs in the same silent way) is compiled on npu and compared with eager
npu (ATen's CPU kernels) at log-spaced magnitudes from 1e-6 to 1e6 of both
signs, a dense ramp over [-10, 10], the edges of the ops' domains (+-1 and
its neighbours, ln(FLT_MAX), huge values), +-0, +-inf and NaN, for float32,
float16, bfloat16 and int64 inputs, with ``torch.testing.assert_close``'s
default tolerances for the result's dtype. What this found is in
``_math.py`` (Note [Math MLIR expands unsoundly] and the Notes with it).

All ops of one dtype are one compilation (``dynamic=False``) of one
function of all the values in one tensor (Note [Results that fold into
one] came from there). A kernel that MLIR could not build would run its
aten ops eagerly and compare equal whatever its compiled form does, so the
ops MLIR lowers are compiled apart from those it does not
(``_NOT_LOWERED``), and a fallback among the former fails the test.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from torch_npu.graph.compile import _mlir
from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")

# Eager's own sinh and cosh of float32 disagree with themselves between
# ln(FLT_MAX) and the largest x with a finite result: ATen's vectorised loop
# gives inf, its scalar tail the finite value. These x are checked against
# float64 instead (test_sinh_cosh_near_overflow).
_EAGER_INCONSISTENT = (88.0, 90.0)

_OPS = {
    "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1, "log": torch.log, "log1p": torch.log1p,
    "log2": torch.log2, "log10": torch.log10, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
    "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh,
    "tanh": torch.tanh, "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh, "erf": torch.erf,
    "sigmoid": torch.sigmoid, "rsqrt": torch.rsqrt, "sqrt": torch.sqrt, "reciprocal": torch.reciprocal,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu, "softplus": F.softplus,
    "mish": F.mish, "logit": torch.logit, "logsigmoid": F.logsigmoid, "tanhshrink": F.tanhshrink,
    "elu": F.elu, "selu": F.selu, "celu": F.celu, "softsign": F.softsign, "sinc": torch.sinc,
    "hardswish": F.hardswish, "ndtr": torch.special.ndtr, "xlogy": lambda x: torch.xlogy(x, x),
    "erfc": torch.erfc, "erfinv": torch.erfinv, "hypot": lambda x: torch.hypot(x, x.flip(0)),
    # NaN must go through (Note [NaN through clamp, maximum and minimum])
    "clamp": lambda x: x.clamp(-3, 3), "clamp_min": lambda x: x.clamp_min(0), "hardtanh": F.hardtanh,
    "relu6": F.relu6, "hardsigmoid": F.hardsigmoid,
    "maximum": lambda x: torch.maximum(x, x.new_zeros(())), "minimum": lambda x: torch.minimum(x, x.new_zeros(())),
}
# Ops torch-mlir does not lower (their kernels run eagerly, with the
# fallback warning): still compared, compiled apart.
_NOT_LOWERED = {"lgamma": torch.lgamma, "digamma": torch.digamma}
# Ops whose domain leaves out values where eager is wrong: ATen's GELU of
# +inf is NaN, and of 3e38 inf (its x * (1 + erf) overflows); the kernel
# gives +inf and 3e38.
_GELU = {"gelu": F.gelu}

# Where eager float16 is itself off, the kernel is compared with the value
# eager computes in float32 and rounds: ATen's float16 logit is
# log(x / (1 - x)) rounded at each step (two ulps off at x = 0.4216, where
# the kernel is right), and its float16 x ** 0.5 is std::pow, +inf at -inf,
# where its float32 one is sqrt, NaN (the kernel's NaN).
_EAGER_HALF_OFF = {"logit": torch.logit, "pow_half": lambda x: x ** 0.5}

# Ops eager computes as several ops of the half type, rounding in between:
# tanhshrink is x - tanh(x), with tanh(x) rounded (0 for |x| < 0.04, where
# x^3 / 3 is not), ndtr rounds before its erfc (0 below -4, where the
# float64 value is 1e-5). A compiled kernel computes the chain in float32
# and rounds once (Note [Half-precision pointwise work in float32]): it is
# compared, in float16 and bfloat16, with the chain computed in float32
# and rounded once.
_EAGER_HALF_ROUNDS = {"tanhshrink": F.tanhshrink, "ndtr": torch.special.ndtr}

_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64]
_INTEGER_OPS = {"exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos",
                "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "sigmoid", "rsqrt", "sqrt",
                "reciprocal", "logit", "sinc", "ndtr", "xlogy", "softsign", "tanhshrink", "erfc", "erfinv", "lgamma",
                "digamma"}


def _domain(dtype: torch.dtype) -> torch.Tensor:
    magnitudes = torch.logspace(-6, 6, 97, dtype=torch.float64)
    edges = torch.tensor([0.5, 1 - 1e-3, 1 - 1e-6, 1.0, 1 + 1e-6, 1 + 1e-3, 2.0, 88.5, 709.0, 1e10, 1e20, 1e30,
                          3e38], dtype=torch.float64)
    values = torch.cat([magnitudes, -magnitudes, torch.linspace(-10, 10, 201, dtype=torch.float64), edges, -edges])
    values = values[(values.abs() < _EAGER_INCONSISTENT[0]) | (values.abs() > _EAGER_INCONSISTENT[1])]
    if not dtype.is_floating_point:
        return values.clamp(-2.0 ** 62, 2.0 ** 62).round().to(dtype).unique().to("npu")
    specials = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan], dtype=torch.float64)
    return torch.cat([values, specials]).to(dtype).to("npu")


def _check(ops: dict, x: torch.Tensor, lowered: bool) -> None:
    names = [n for n in ops if x.dtype.is_floating_point or n in _INTEGER_OPS]
    names = [n for n in names if not (n in _EAGER_HALF_OFF and x.dtype == torch.float16)]
    names = [n for n in names if not (n in _EAGER_HALF_ROUNDS and x.dtype in (torch.float16, torch.bfloat16))]
    fns = [ops[n] for n in names]

    def all_ops(t):
        return tuple(f(t) for f in fns)

    expected = all_ops(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = torch.compile(all_ops, dynamic=False)(x)
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, NPUKernelFallbackWarning)]
    if lowered:
        assert not fallbacks, f"kernels ran eagerly, so their results prove nothing: {fallbacks}"
    wrong = []
    for name, a, e in zip(names, actual, expected):
        try:
            torch.testing.assert_close(a, e, equal_nan=True)
        except AssertionError as error:
            a, e, at = a.cpu().double(), e.cpu().double(), x.cpu()
            bad = ~torch.isclose(a, e, rtol=1.3e-6 if e.dtype == torch.float32 else 1.6e-2, atol=1e-5,
                                 equal_nan=True)
            summary = " ".join(str(error).split())[:200]
            wrong.append(f"{name} at x = {at[bad][:6].tolist()}: compiled {a[bad][:6].tolist()}, "
                         f"eager {e[bad][:6].tolist()} ({summary})")
    assert not wrong, f"compiled {x.dtype} math differs from eager:\n" + "\n".join(wrong)


@needs_mlir
@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_lowered_math_matches_eager_over_its_domain(dtype):
    _check(_OPS, _domain(dtype), lowered=True)


@needs_mlir
@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_math_run_eagerly_matches_eager_over_its_domain(dtype):
    _check(_NOT_LOWERED, _domain(dtype), lowered=False)


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_gelu_matches_eager_below_overflow(dtype):
    x = _domain(dtype)
    _check(_GELU, x[x.abs() < 1e38], lowered=True)


@needs_mlir
@pytest.mark.parametrize("op", ["sinh", "cosh"])
def test_sinh_cosh_near_overflow(op):
    # exp(89) overflows float32, sinh(89) = 2.24e38 does not; the kernel's
    # result is compared with float64's, rounded (see _EAGER_INCONSISTENT).
    x = torch.tensor([88.5, 88.8, 89.0, 89.4, -88.8, -89.0, -89.4, 90.0, -90.0], device="npu")
    fn = getattr(torch, op)
    actual = torch.compile(fn, dynamic=False)(x)
    torch.testing.assert_close(actual, fn(x.double()).float())


@needs_mlir
@pytest.mark.parametrize("name", list(_EAGER_HALF_OFF))
def test_float16_where_eager_rounds_more(name):
    fn = _EAGER_HALF_OFF[name]
    x = _domain(torch.float16)
    actual = torch.compile(fn, dynamic=False)(x)
    torch.testing.assert_close(actual, fn(x.float()).half(), equal_nan=True)


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(_EAGER_HALF_ROUNDS))
def test_half_chains_round_once(name, dtype):
    fn = _EAGER_HALF_ROUNDS[name]
    x = _domain(dtype)
    actual = torch.compile(fn, dynamic=False)(x)
    torch.testing.assert_close(actual, fn(x.float()).to(dtype), equal_nan=True)


@needs_mlir
def test_erf_near_zero_is_accurate_relative_to_its_value():
    # The polynomial erf's absolute error (1.5e-7) was 13% of erf(1e-6);
    # assert_close's atol hides that, so this compares relative error only.
    x = torch.cat([torch.logspace(-7, -0.5, 40), -torch.logspace(-7, -0.5, 40)]).to("npu")
    actual = torch.compile(torch.erf, dynamic=False)(x)
    torch.testing.assert_close(actual, torch.erf(x), rtol=1e-6, atol=0)
