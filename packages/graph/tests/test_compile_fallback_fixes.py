"""Ops the wide compiled OpInfo scan (test_compile_opinfo_full.py) found
running eagerly (class ``loud_fallback``) that now compile to MLIR kernels,
each compared with eager npu at edge values (NaN, +-inf, +-0, negative,
huge, tiny) and required to run without a fallback
(NPUKernelFallbackWarning):

- erfc and hypot, which torch-mlir does not lower (Note [Math torch-mlir
  does not lower], _math.py);
- the spellings torch-mlir folds or lowers wrongly (Note [Ops torch-mlir
  folds or lowers wrongly], _program.py): ``eq`` (amax's and amin's
  backward), bool constants kept in bytes (isfinite, isreal, isposinf,
  isneginf of integers), 8-bit floor division, as_strided_copy;
- copysign and signbit, which torch-mlir spells with a ``view.dtype`` it
  does not lower (Note [Bitcasts torch-mlir does not lower], _bitcasts.py).

Inputs are made inside each test: npu tensors made at import stay
allocated for the whole session.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from torch_npu.graph.compile import _mlir
from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")

_FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def _compiled_as_mlir(fn, *args):
    """``fn`` compiled and run; fails if a kernel fell back to eager."""
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = torch.compile(fn, dynamic=False)(*args)
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, NPUKernelFallbackWarning)]
    assert not fallbacks, fallbacks
    return actual


def _edges(dtype: torch.dtype) -> torch.Tensor:
    magnitudes = torch.logspace(-30, 30, 61, dtype=torch.float64)
    values = torch.cat([magnitudes, -magnitudes, torch.linspace(-12, 12, 481, dtype=torch.float64),
                        torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 3e38, -3e38, 1e-45])])
    return values.to(dtype).to("npu")


@needs_mlir
@pytest.mark.parametrize("dtype", _FLOATS, ids=str)
def test_erfc_compiles_and_matches_eager(dtype):
    x = _edges(dtype)
    actual = _compiled_as_mlir(torch.erfc, x)
    torch.testing.assert_close(actual, torch.erfc(x), equal_nan=True)


@needs_mlir
def test_erfc_is_accurate_relative_to_its_value():
    # 1 - erf(x) would be 0 or an ulp of 1 where erfc(x) is tiny;
    # assert_close's atol hides that, so this compares relative error only.
    x = torch.linspace(-3, 9, 2001, device="npu")
    actual = _compiled_as_mlir(torch.erfc, x)
    torch.testing.assert_close(actual, torch.erfc(x), rtol=2e-6, atol=0)


@needs_mlir
@pytest.mark.parametrize("dtype", _FLOATS, ids=str)
def test_hypot_compiles_and_matches_eager(dtype):
    # Every pair of edge values, both ways round: inf wins over NaN, NaN
    # over any number, no overflow at 3e38 nor underflow at 1e-30.
    edges = torch.tensor([0.0, -0.0, 1.0, -2.5, 1e-30, 1e30, 3e38, -3e38, math.inf, -math.inf, math.nan],
                         dtype=torch.float64)
    a, b = torch.meshgrid(edges, edges, indexing="ij")
    a, b = a.to(dtype).to("npu"), b.to(dtype).to("npu")
    actual = _compiled_as_mlir(torch.hypot, a, b)
    torch.testing.assert_close(actual, torch.hypot(a, b), equal_nan=True)
    x, y = _edges(dtype), _edges(dtype).flip(0)
    torch.testing.assert_close(_compiled_as_mlir(torch.hypot, x, y), torch.hypot(x, y), equal_nan=True)


@needs_mlir
@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("shape", [(), (5,), (3, 4)], ids=str)
def test_amax_amin_gradients_compile_and_keep_nan(op, shape):
    # The backward compares the input with its amax; of a 0-d tensor that
    # is eq(x, x), which torch-mlir folded to True (also at NaN).
    values = torch.tensor([1.0, math.nan, -math.inf, 2.0, 2.0, math.inf, -0.0, 0.0, -3.0, 7.0, 7.0, 1e30])
    x = values[: math.prod(shape)].reshape(shape).to("npu").requires_grad_()

    def gradient(x):
        reduced = getattr(x, op)()
        return torch.autograd.grad(reduced * 3, [x])[0]

    actual = _compiled_as_mlir(gradient, x)
    torch.testing.assert_close(actual, gradient(x), equal_nan=True)


@needs_mlir
def test_eq_of_a_value_with_itself_is_false_at_nan():
    x = torch.tensor([1.0, math.nan, -math.inf, math.inf, -0.0], device="npu")
    actual = _compiled_as_mlir(lambda t: (t * 1 == t, t.amax() == t[1]), x)
    torch.testing.assert_close(actual, (x * 1 == x, x.amax() == x[1]))


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int64], ids=str)
@pytest.mark.parametrize("op", ["isfinite", "isreal", "isposinf", "isneginf", "isinf", "isnan"])
def test_float_predicates_of_integers_compile(dtype, op):
    # Of integers they are constants, which torch-mlir folded into an int8
    # literal it then rejected as the uint8 bytes of the bool result.
    info = torch.iinfo(dtype)
    x = torch.tensor([[info.min, -1 if info.min < 0 else 0, 0], [1, 7, info.max]], dtype=dtype, device="npu")
    fn = getattr(torch, op)
    torch.testing.assert_close(_compiled_as_mlir(fn, x), fn(x))


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8], ids=str)
def test_floor_division_of_bytes_compiles(dtype):
    info = torch.iinfo(dtype)
    values = torch.tensor(sorted({info.min, info.min + 1, -7, -1, 0, 1, 2, 7, info.max - 1, info.max}
                                 & set(range(info.min, info.max + 1))), dtype=dtype)
    a, b = torch.meshgrid(values, values[values != 0], indexing="ij")
    a, b = a.to("npu"), b.to("npu")
    torch.testing.assert_close(_compiled_as_mlir(torch.floor_divide, a, b), torch.floor_divide(a, b))
    torch.testing.assert_close(_compiled_as_mlir(lambda t: torch.div(t, 3, rounding_mode="floor"), a),
                               torch.div(a, 3, rounding_mode="floor"))


@needs_mlir
def test_as_strided_copy_compiles():
    x = torch.tensor([1.0, math.nan, -math.inf, math.inf, -0.0, 3e38, -5.0, 1e-30, 2.0, 8.0, 9.0, 10.0],
                     device="npu")

    def overlapping(t):
        return torch.as_strided_copy(t * 2, (3, 4), (2, 1), 1)

    torch.testing.assert_close(_compiled_as_mlir(overlapping, x), overlapping(x), equal_nan=True)

    def transposed(t):
        return torch.as_strided_copy(t.reshape(3, 4) - 1, (4, 3), (1, 4))

    torch.testing.assert_close(_compiled_as_mlir(transposed, x), transposed(x), equal_nan=True)


@needs_mlir
@pytest.mark.parametrize("dtype", [*_FLOATS, torch.float64], ids=str)
def test_copysign_and_signbit_compile_with_the_sign_of_nan_and_zero(dtype):
    # torch-mlir spells them with view.dtype, which it does not lower
    # (Note [Bitcasts torch-mlir does not lower]). inf - inf is a NaN with
    # its sign bit set on x86; -0.0 has one too.
    x = torch.tensor([1.0, -2.0, 0.0, -0.0, math.inf, -math.inf, math.nan, 3e38, 5.0, 6.0, 1e-30, -7.0],
                     dtype=dtype, device="npu")
    y = torch.tensor([-1.0, 2.0, -0.0, 0.0, -3.0, 4.0, -1.0, -0.0, math.nan, math.inf, -math.inf, 1e-30],
                     dtype=dtype, device="npu")

    def signs(a, b):
        negative_nan = (b * math.inf) - (b * math.inf)  # NaN, or -NaN, per element
        if b.dtype == torch.bfloat16:
            # Eager rounds a bfloat16 NaN it computes to +NaN (c10's
            # rounding), the kernel keeps the sign the CPU gave it: a
            # difference of the subtraction's NaN, not of copysign.
            negative_nan = b
        return (torch.copysign(a, b), torch.copysign(a, negative_nan), torch.signbit(b),
                torch.signbit(negative_nan), torch.copysign(a[0], b[1]))

    torch.testing.assert_close(_compiled_as_mlir(signs, x, y), signs(x, y), equal_nan=True)
    # compared bit for bit: assert_close does not see the sign of a NaN
    actual, expected = _compiled_as_mlir(signs, x, y)[1], signs(x, y)[1]
    assert torch.equal(torch.signbit(actual), torch.signbit(expected))
