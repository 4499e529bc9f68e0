"""How a program computes math ops whose MLIR lowering is not accurate.

A compiled npu kernel must give what eager npu (ATen's CPU kernels) gives,
within the tolerances ``torch.testing.assert_close`` allows for the dtype,
over each op's whole domain. torch-mlir and MLIR lower several math ops to
expansions that are wrong outside a neighbourhood of 0, silently; this
module decides, in one place, how a program computes those ops instead
(:func:`math_call`, used by ``_program._call``). The decisions and the
errors they fix (all measured on the tree's torch-mlir by
``tests/test_compile_math_domain.py``) are in the Notes below.

Note [Half-precision math in float32]
MLIR expands transcendental functions into arithmetic in the operand's own
type, and in float16 or bfloat16 the steps lose most digits: compiled asinh
of float16 was off by 0.1 near 3.0, tanh and erf of float16 values below
1e-4 came out 0 (or -0.001), exp2(10) was 1026. (pow with a scalar
exponent is among them for the same reason; its small integral exponents
are products, see ``_program._call``.) Eager npu, like ATen on CPU
and like Inductor's own code generation, computes half-precision math in
float32 and rounds once; a program does the same for the ops in
``_MATH_IN_FLOAT32``. float32 exp2 is computed in float64 (``_MATH_IN_FLOAT64``):
MLIR's exp2 is exp(x * ln 2), whose relative error grows with x (2e-6 at
x = 100, beyond float32's tolerance), and float64 makes that error vanish
for every x float32 can take, at the price of a libm call per element for
an op no hot path uses.

Note [Math MLIR expands unsoundly]
Four ops are computed by formulas of their own (``_SOUND_FORMS``), in
vectorisable aten ops:

- asinh: MLIR's log(x + sqrt(x * x + 1)) cancels for x < 0 (asinh(-100)
  was -5.29887 for -5.29834; -1e5 gave -inf) and overflows for |x| > 1e19.
  The program computes sign(x) * log1p(|x| + x^2 / (1 + sqrt(1 + x^2))),
  which adds only positive terms, and log(|x|) + ln 2 once |x| > 2^28,
  where the two agree to far below a float64 ulp.
- acosh: MLIR's log(x + sqrt(x * x - 1)) gave -inf instead of NaN for
  x < -3000 and overflows for x > 1e19. The program computes
  log1p(t + sqrt(t) * sqrt(t + 2)) with t = x - 1 (NaN for every x < 1, as
  sqrt(t) is, and exact near 1), and log(x) + ln 2 once x > 2^28.
- sinh, cosh: exp(x) overflows before the result does (cosh(-89) is
  2.24e38, the kernel gave inf). With h = exp(|x| / 2), cosh(x) is
  (h / 2) * h + 1 / (2 h^2) and sinh(x) for |x| >= 1 is
  sign(x) * ((h / 2) * h - 1 / (2 h^2)): no intermediate overflows before
  the result does. sinh(x) for |x| < 1 is (e + e / (e + 1)) / 2 with
  e = expm1(x), without the cancellation of exp(x) - exp(-x).
- erf: MLIR lowers math.erf to a libm call per element (six times slower
  than ATen), so the program computes erf by Abramowitz & Stegun 7.1.26
  (absolute error 1.5e-7, about a float32 ulp at 1) and, for |x| < 0.5,
  where that absolute error would be a large relative one (13% at 1e-6),
  by its Taylor series to x^13 (relative error below 1e-9 there); the
  erf inside GELU, whose result is added to 1, keeps the polynomial alone
  (the series cost its kernels 30%).

Note [Math torch-mlir does not lower]
torch-mlir has no lowering of erfc, erfinv or hypot, so every kernel with one ran
its aten ops eagerly (with the fallback warning). A program computes them
by formulas of their own (``_SOUND_FORMS``, ``_BINARY_FORMS``), in
vectorisable aten ops, in float32 for half-precision operands (Note
[Half-precision math in float32]):

- erfc: 1 - erf(x) cancels for x > 0 (erfc(4) = 1.5e-8 would be a float32
  ulp of 1 or 0), so the program computes erfc(|x|) as
  t * exp(-x^2 + P(t)) with t = 1 / (1 + |x| / 2) and P the degree-9
  Chebyshev fit of Numerical Recipes (erfcc, relative error below 1.2e-7
  for every x), and 2 - erfc(|x|) for x < 0; x^2 is split so that its
  rounding does not enter exp (that alone was 9e-6 relative at x = 8). exp(-x^2) underflows where
  erfc does (x > 9.2 in float32), +inf gives 0, -inf 2, NaN NaN. Of
  float64 the fit is not accurate enough (1e-7 relative is float64's
  tolerance): its kernels still run eagerly, with the warning.
- erfinv: by Giles' single-precision approximation ("Approximating the
  erfinv function", GPU Computing Gems, 2011): with
  w = -log((1 - x)(1 + x)), erfinv(x) = x * P(w - 2.5) for w < 5 and
  x * Q(sqrt(w) - 3) beyond, P and Q polynomials of degree 8. Over a dense
  float32 grid of (-1, 1) (and 1 - 1e-8 ... 1 - 0.1, and 1e-40 ... 1) it
  is within float32's tolerance of eager's erfinv everywhere; +-1 give
  +-inf (where the polynomial of an infinite w does not), |x| > 1 and NaN
  NaN (the log of a negative). Of float64 it is not accurate enough: its
  kernels still run eagerly, with the warning.
- hypot: sqrt(x^2 + y^2) overflows for |x| > 1.8e19 and underflows for
  |x| < 1e-19 (float32). The program computes m * sqrt(1 + (s / m)^2) with
  m the larger and s the smaller of |x| and |y| (0 where m is 0), and +inf
  where either is infinite, whatever the other (NaN included), as C's
  hypot does; any other NaN operand gives NaN.

Note [Integer operands of float math]
A unary math op of an integer tensor (``torch.erf(int64)``) gives a float
tensor; eager converts the integers to that float type first. torch-mlir
instead works on the integers for some ops: the reciprocal of an int64
tensor holding 0 stopped the process in torch-mlir's divisor assert, and the
polynomial erf squared int64 values (overflowing for |x| > 3e9). A program
therefore converts an integer operand of a unary op with a floating result
to that result's dtype before anything else.

Note [NaN through clamp, maximum and minimum]
torch-mlir lowers clamp, clamp_min, clamp_max, maximum and minimum of floats
to a compare and a select, which drops a NaN operand: hardtanh, relu6 and
hardsigmoid of NaN gave a number, where eager (and IEEE maximum) gives NaN.
A program puts a NaN operand back with ``where(x != x, x, result)``, one
vectorised compare and select per operand.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx

aten = torch.ops.aten

_HALF = (torch.float16, torch.bfloat16)

# Note [Half-precision math in float32]
_MATH_IN_FLOAT32 = {"asinh", "acosh", "atanh", "sinh", "cosh", "asin", "acos", "atan", "tan", "tanh", "log1p",
                    "expm1", "exp2", "erf", "erfc", "erfinv", "lgamma", "digamma", "pow"}
_MATH_IN_FLOAT64 = {"exp2"}

# Note [Integer operands of float math]: the ops whose integer operand is
# converted (an allowlist: a view.dtype of integers also has a float result,
# and must not convert).
_FLOAT_MATH = _MATH_IN_FLOAT32 | {
    "exp", "log", "log2", "log10", "sin", "cos", "sqrt", "rsqrt", "reciprocal", "sigmoid", "erfc", "i0", "sinc",
    "special_i0e", "special_i1", "special_i1e", "special_ndtri", "special_erfcx", "special_log_ndtr",
}

# Note [NaN through clamp, maximum and minimum]: the ops, and which of their
# arguments may carry a NaN into the result.
_NAN_DROPPING = {"clamp": (0,), "clamp_min": (0,), "clamp_max": (0,), "maximum": (0, 1), "minimum": (0, 1)}

# Part of a kernel's cache key (_mlir.REWRITES): the source of a program
# names these functions, so a change to one must change this number.
MATH_FORMS_VERSION = 4

_LN2 = 0.6931471805599453
# Above 2^28, asinh(x) and acosh(x) equal log(x) + ln 2 to below a float64
# ulp (the difference is about 1 / (4 x^2)), and x^2 cannot overflow below.
_LARGE = 2.0 ** 28


def math_call(node: torch.fx.Node, name: str, args: list[str], names: dict[torch.fx.Node, str]) -> str | None:
    """The source of ``node``'s call when this module decides how it is
    computed (``name``: the op's qualified name, ``args``: its printed
    arguments, ``names``: the program's names of the values computed so
    far), else None."""
    op = node.target._opname
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or not value.dtype.is_floating_point:
        return None
    if op in _NAN_DROPPING:
        return _nan_kept(node, f"{name}({', '.join(args)})", args, value.dtype)
    if op in _BINARY_FORMS:
        return _binary_form_call(node, _BINARY_FORMS[op], args, value.dtype)
    # One tensor operand, and scalars (pow's exponent) after it.
    operand = node.args[0] if node.args else None
    if (node.kwargs or not isinstance(operand, torch.fx.Node)
            or any(isinstance(a, (torch.fx.Node, list, tuple)) for a in node.args[1:])):
        return None
    operand_value = operand.meta.get("val")
    if not isinstance(operand_value, torch.Tensor):
        return None
    integer_operand = (op in _FLOAT_MATH and not operand_value.dtype.is_floating_point
                       and not operand_value.dtype.is_complex)
    compute = _compute_dtype(op, value.dtype)
    form = _SOUND_FORMS.get(op) if len(node.args) == 1 else None
    if op in ("erf", "erfc", "erfinv") and compute == torch.float64:
        # the polynomials are float32 ones; MLIR's erf of float64 calls
        # libm, erfc and erfinv of float64 run eagerly (Note [Math
        # torch-mlir does not lower])
        form = None
    if not integer_operand and compute == value.dtype and form is None:
        return None

    def converted(source: str) -> str:
        # Note [Integer operands of float math]: first to the result's
        # dtype, as eager does; then to the dtype the op is computed in.
        if integer_operand:
            source = _to(source, value.dtype)
        return _to(source, compute) if compute != value.dtype else source

    scaled = _erf_scale_source(node, names) if form == "_erf" else None
    if scaled is not None:
        # Note [GELU's Gaussian computed once]
        call = f"_erf_of_scaled({converted(args[0])}, {converted(scaled)})"
    elif form is not None:
        call = f"{form}({converted(args[0])})"
    else:
        call = f"{name}({', '.join([converted(args[0]), *args[1:]])})"
    return _to(call, value.dtype) if compute != value.dtype else call


def _binary_form_call(node: torch.fx.Node, form: str, args: list[str], dtype: torch.dtype) -> str | None:
    """The call of a two-operand form (Note [Math torch-mlir does not
    lower]): both operands tensors, converted to the dtype it is computed
    in, its result back to ``dtype``."""
    if node.kwargs or len(node.args) != 2 or not all(isinstance(a, torch.fx.Node) for a in node.args):
        return None
    compute = torch.float32 if dtype in _HALF else dtype
    operands = []
    for arg, source in zip(node.args, args):
        operand = arg.meta.get("val")
        if not isinstance(operand, torch.Tensor):
            return None
        operands.append(source if operand.dtype == compute else _to(source, compute))
    call = f"{form}({', '.join(operands)})"
    return _to(call, dtype) if compute != dtype else call


def _compute_dtype(op: str, dtype: torch.dtype) -> torch.dtype:
    if dtype in _HALF and op in _MATH_IN_FLOAT32:
        return torch.float32
    if dtype == torch.float32 and op in _MATH_IN_FLOAT64:
        return torch.float64
    return dtype


def _to(source: str, dtype: torch.dtype) -> str:
    return f"torch.ops.aten._to_copy.default({source}, dtype={dtype})"


def _nan_kept(node: torch.fx.Node, call: str, args: list[str], dtype: torch.dtype) -> str:
    """``call`` with the NaN of each operand that may carry one put back
    (Note [NaN through clamp, maximum and minimum])."""
    for i in _NAN_DROPPING[node.target._opname]:
        if i >= len(node.args) or not isinstance(node.args[i], torch.fx.Node):
            continue
        operand = node.args[i].meta.get("val")
        # An operand of another dtype (promoted) or shape (broadcast) is
        # left to the op itself: where() would change the result's type.
        if not isinstance(operand, torch.Tensor) or operand.dtype != dtype:
            continue
        call = f"torch.ops.aten.where.self(torch.ops.aten.ne.Tensor({args[i]}, {args[i]}), {args[i]}, {call})"
    return call


# Note [GELU's Gaussian computed once]
# GELU's backward needs erf(x / sqrt(2)) and the Gaussian exp(-x * x / 2),
# and the polynomial erf computes exp(-z * z) for z = x / sqrt(2): the same
# value, which Inductor's decomposition spells exp(mul(mul(x, x), -0.5)).
# So an erf of mul(x, 1 / sqrt(2)) computes its exponential from x in
# exactly those ops (_erf_of_scaled): the kernel's fused loop body then
# holds two identical chains, which LLVM computes once, and the backward's
# two exps become one. The exponent differs from -z * z only in rounding
# (about one float32 ulp of the argument, far inside the polynomial's own
# error).
_SQRT1_2 = 0.7071067811865476


def _erf_scale_source(node: torch.fx.Node, names: dict[torch.fx.Node, str]) -> str | None:
    """The program's name of x when ``node`` is erf(x * (1 / sqrt(2))) and
    x is computed by then, else None."""
    source = node.args[0]
    if (isinstance(source, torch.fx.Node) and source.target is aten.mul.Tensor and not source.kwargs
            and len(source.args) == 2 and source.args[1] == _SQRT1_2 and source.args[0] in names):
        return names[source.args[0]]
    return None


# Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7, about one float32 ulp at 1.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
# Below this |x| erf is its Taylor series: 2 / sqrt(pi) * sum of
# (-1)^n x^(2n+1) / (n! (2n + 1)) for n <= 6 (the first term left out is
# below 1e-9 of the sum at 0.5).
_ERF_SERIES_BELOW = 0.5
_ERF_SERIES = tuple((-1) ** n * 2 / math.sqrt(math.pi) / (math.factorial(n) * (2 * n + 1)) for n in range(7))


def _erf(x: torch.Tensor) -> torch.Tensor:
    """erf for float32 (Note [Math MLIR expands unsoundly])."""
    far = _erf_from(x, aten.exp.default(aten.neg.default(aten.mul.Tensor(x, x))))
    return aten.where.self(aten.lt.Scalar(aten.abs.default(x), _ERF_SERIES_BELOW), _erf_near_zero(x), far)


def _erf_of_scaled(z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """erf(z) for z = x / sqrt(2) (float32), its exponential computed from x
    (Note [GELU's Gaussian computed once]). Without the series near 0: GELU
    adds erf to 1, where the polynomial's absolute error is what counts, and
    the series made its kernels 30% slower."""
    return _erf_from(z, aten.exp.default(aten.mul.Tensor(aten.mul.Tensor(x, x), -0.5)))


def _erf_from(x: torch.Tensor, gaussian: torch.Tensor) -> torch.Tensor:
    """erf(x) by Abramowitz & Stegun 7.1.26, given exp(-x * x)."""
    t = aten.reciprocal.default(aten.add.Tensor(aten.mul.Tensor(aten.abs.default(x), _ERF_P), 1.0))
    poly = aten.mul.Tensor(t, _ERF_A[4])
    for a in reversed(_ERF_A[:4]):
        poly = aten.mul.Tensor(aten.add.Tensor(poly, a), t)
    tail = aten.mul.Tensor(poly, gaussian)
    return aten.mul.Tensor(aten.sign.default(x), aten.rsub.Scalar(tail, 1.0))


def _erf_near_zero(x: torch.Tensor) -> torch.Tensor:
    """erf(x) by its Taylor series, for |x| < _ERF_SERIES_BELOW."""
    square = aten.mul.Tensor(x, x)
    series = aten.mul.Tensor(square, _ERF_SERIES[-1])
    for c in reversed(_ERF_SERIES[1:-1]):
        series = aten.mul.Tensor(aten.add.Tensor(series, c), square)
    return aten.mul.Tensor(aten.add.Tensor(series, _ERF_SERIES[0]), x)


# Numerical Recipes' Chebyshev fit of erfc (Note [Math torch-mlir does not
# lower]): erfc(z) = t * exp(-z * z + sum of c_k * t^k), t = 1 / (1 + z / 2).
_ERFC_C = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
           -0.82215223, 0.17087277)
# Dekker's splitting constant of float32 (2^12 + 1): z * _SPLIT - (z * _SPLIT - z)
# keeps z's 12 leading significant bits.
_SPLIT = 4097.0


def _erfc(x: torch.Tensor) -> torch.Tensor:
    """erfc without cancellation (Note [Math torch-mlir does not lower])."""
    # Beyond 16 erfc is 0 in every float type but float64, and clamping
    # keeps z * _SPLIT finite; a NaN stays NaN (it compares false).
    z = aten.abs.default(x)
    z = aten.where.self(aten.gt.Scalar(z, 16.0), aten.full_like.default(z, 16.0), z)
    t = aten.reciprocal.default(aten.add.Tensor(aten.mul.Tensor(z, 0.5), 1.0))
    poly = aten.mul.Tensor(t, _ERFC_C[-1])
    for c in reversed(_ERFC_C[1:-1]):
        poly = aten.mul.Tensor(aten.add.Tensor(poly, c), t)
    # exp(-z^2) with z^2 rounded would be off by z^2 ulps (7e-6 at z = 8):
    # z = high + low with high of 12 significant bits, so high^2 is exact,
    # and exp(-z^2) = exp(-high^2) * exp(-low * (z + high)).
    scaled = aten.mul.Tensor(z, _SPLIT)
    high = aten.sub.Tensor(scaled, aten.sub.Tensor(scaled, z))
    low = aten.sub.Tensor(z, high)
    small = aten.sub.Tensor(aten.add.Tensor(poly, _ERFC_C[0]), aten.mul.Tensor(low, aten.add.Tensor(z, high)))
    gaussian = aten.exp.default(aten.neg.default(aten.mul.Tensor(high, high)))
    of_magnitude = aten.mul.Tensor(aten.mul.Tensor(t, gaussian), aten.exp.default(small))
    return aten.where.self(aten.lt.Scalar(x, 0), aten.rsub.Scalar(of_magnitude, 2.0), of_magnitude)


# Giles' single-precision erfinv (Note [Math torch-mlir does not lower]):
# the coefficients of P(w - 2.5), for w < 5, and of Q(sqrt(w) - 3), highest
# degree first.
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                   -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                0.00943887047, 1.00167406, 2.83297682)


def _polynomial(coefficients: tuple[float, ...], w: torch.Tensor) -> torch.Tensor:
    """The polynomial of ``coefficients`` (highest degree first) at w."""
    p = aten.add.Tensor(aten.mul.Tensor(w, coefficients[0]), coefficients[1])
    for c in coefficients[2:]:
        p = aten.add.Tensor(aten.mul.Tensor(p, w), c)
    return p


def _erfinv(x: torch.Tensor) -> torch.Tensor:
    """erfinv for float32 (Note [Math torch-mlir does not lower])."""
    w = aten.neg.default(aten.log.default(aten.mul.Tensor(aten.rsub.Scalar(x, 1.0), aten.add.Tensor(x, 1.0))))
    central = _polynomial(_ERFINV_CENTRAL, aten.sub.Tensor(w, 2.5))
    tail = _polynomial(_ERFINV_TAIL, aten.sub.Tensor(aten.sqrt.default(w), 3.0))
    result = aten.mul.Tensor(aten.where.self(aten.lt.Scalar(w, 5.0), central, tail), x)
    return aten.where.self(aten.eq.Scalar(aten.abs.default(x), 1.0), aten.mul.Tensor(x, math.inf), result)


def _hypot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """hypot without overflow or underflow (Note [Math torch-mlir does not lower])."""
    a, b = aten.abs.default(x), aten.abs.default(y)
    # A NaN operand is taken as the larger, and the result is NaN.
    b_larger = aten.logical_or.default(aten.lt.Tensor(a, b), aten.ne.Tensor(b, b))
    larger, smaller = aten.where.self(b_larger, b, a), aten.where.self(b_larger, a, b)
    ratio = aten.where.self(aten.eq.Scalar(larger, 0), aten.zeros_like.default(larger),
                            aten.div.Tensor(smaller, larger))
    result = aten.mul.Tensor(larger, aten.sqrt.default(aten.add.Tensor(aten.mul.Tensor(ratio, ratio), 1.0)))
    infinite = aten.logical_or.default(aten.eq.Scalar(a, math.inf), aten.eq.Scalar(b, math.inf))
    return aten.where.self(infinite, aten.full_like.default(result, math.inf), result)


def _with_sign_of(magnitude: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return aten.where.self(aten.lt.Scalar(x, 0), aten.neg.default(magnitude), magnitude)


def _asinh(x: torch.Tensor) -> torch.Tensor:
    """asinh without cancellation or overflow (Note [Math MLIR expands unsoundly])."""
    a = aten.abs.default(x)
    square = aten.mul.Tensor(a, a)
    root = aten.add.Tensor(aten.sqrt.default(aten.add.Tensor(square, 1.0)), 1.0)
    near = aten.log1p.default(aten.add.Tensor(a, aten.div.Tensor(square, root)))
    far = aten.add.Tensor(aten.log.default(a), _LN2)
    return _with_sign_of(aten.where.self(aten.gt.Scalar(a, _LARGE), far, near), x)


def _acosh(x: torch.Tensor) -> torch.Tensor:
    """acosh, NaN below 1, without overflow (Note [Math MLIR expands unsoundly])."""
    t = aten.sub.Tensor(x, 1.0)
    root = aten.mul.Tensor(aten.sqrt.default(t), aten.sqrt.default(aten.add.Tensor(t, 2.0)))
    near = aten.log1p.default(aten.add.Tensor(t, root))
    far = aten.add.Tensor(aten.log.default(x), _LN2)
    return aten.where.self(aten.gt.Scalar(x, _LARGE), far, near)


def _half_exp_parts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """exp(|x|) / 2 and exp(-|x|) / 2, neither overflowing before exp(|x|) / 2 does."""
    h = aten.exp.default(aten.mul.Tensor(aten.abs.default(x), 0.5))
    return (aten.mul.Tensor(aten.mul.Tensor(h, 0.5), h),
            aten.reciprocal.default(aten.mul.Tensor(aten.mul.Tensor(h, h), 2.0)))


def _cosh(x: torch.Tensor) -> torch.Tensor:
    """cosh without an overflowing intermediate (Note [Math MLIR expands unsoundly])."""
    grow, decay = _half_exp_parts(x)
    return aten.add.Tensor(grow, decay)


def _sinh(x: torch.Tensor) -> torch.Tensor:
    """sinh without cancellation near 0 or an overflowing intermediate
    (Note [Math MLIR expands unsoundly])."""
    grow, decay = _half_exp_parts(x)
    far = _with_sign_of(aten.sub.Tensor(grow, decay), x)
    e = aten.expm1.default(x)
    near = aten.mul.Tensor(aten.add.Tensor(e, aten.div.Tensor(e, aten.add.Tensor(e, 1.0))), 0.5)
    return aten.where.self(aten.lt.Scalar(aten.abs.default(x), 1.0), near, far)


# Note [Math MLIR expands unsoundly]: op -> the program's function computing it.
# Note [Math torch-mlir does not lower]: erfc and erfinv here too.
_SOUND_FORMS = {"asinh": "_asinh", "acosh": "_acosh", "sinh": "_sinh", "cosh": "_cosh", "erf": "_erf",
                "erfc": "_erfc", "erfinv": "_erfinv"}
# Note [Math torch-mlir does not lower]: ops of two tensors.
_BINARY_FORMS = {"hypot": "_hypot"}


def scope() -> dict[str, Any]:
    """The functions programs call, for the scope their source runs in."""
    return {"_erf": _erf, "_erf_of_scaled": _erf_of_scaled, "_asinh": _asinh, "_acosh": _acosh,
            "_sinh": _sinh, "_cosh": _cosh, "_erfc": _erfc, "_erfinv": _erfinv, "_hypot": _hypot}
