"""Rewrites of a kernel's imported linalg module that let its loops vectorise.

Two things in torch-mlir's output keep ``affine-super-vectorize`` (or LLVM)
from producing vector code: scalar-only ``math.exp`` (below), and the
``cf.assert`` torch-mlir puts in front of a float reciprocal (its divisor
must not be zero: "unimplemented: tensor with zero element"). An assert in a
loop body stops the vectoriser from touching that loop, and torch defines
1 / 0 as inf for floats, so for float operands the assert is dropped
(:func:`drop_float_reciprocal_asserts`).

Note [Vectorised exp in MLIR kernels]
MLIR lowers ``math.exp`` to LLVM's ``llvm.exp`` intrinsic, which LLVM turns
into one libm ``expf`` call per vector lane: a kernel with an ``exp`` in it
(softmax, GELU's erf and its backward) runs at scalar speed, slower than
ATen's vectorised CPU kernels it replaces. The MLIR in torch-mlir's wheel has
no pass that expands ``exp`` into a polynomial, so this module rewrites each
scalar f32 ``math.exp`` of the imported linalg module (before bufferization
and vectorisation) into ``arith`` ops, which ``affine-super-vectorize``
vectorises like any other elementwise op:

    exp(x) = 2**k * p(r),  k = round(x / ln 2),  r = x - k ln 2

``k`` is rounded with the 1.5 * 2**23 shifter (its low mantissa bits are then
``k`` as an integer), ``r`` is computed with ln 2 split in two (Cody-Waite)
and ``p`` is the degree-7 polynomial of Cephes' ``expf`` (relative error about
1 ulp on [-ln2/2, ln2/2]). ``2**k`` is the product of two powers of two,
each built by writing its exponent into a float's exponent bits (a
bitcast), so that k from -150 (subnormal results) to 128 (results near
FLT_MAX) needs no special case. Inputs are clamped to [-104, ln(FLT_MAX)]:
below, exp is 0; above, +inf; NaN stays NaN. The multiply-adds carry
``fastmath<contract>``, so LLVM fuses them into FMA instructions where the
host has them (a quarter fewer vector ops; exp ran 1.3x faster), with one
rounding instead of two.
"""

from __future__ import annotations

from typing import Any

_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
_SHIFTER = 12582912.0  # 1.5 * 2**23: adding it rounds to an integer in the low mantissa bits
_SHIFTER_BITS = 0x4B400000
_MAX_INPUT = 88.72283935546875  # ln(FLT_MAX), rounded down to a float
_MIN_INPUT = -104.0  # below ln of the smallest subnormal float: exp is 0
# Cephes expf: exp(r) ~ 1 + r + r**2 * P(r) on [-ln2/2, ln2/2]
_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)


def expand_f32_exp(module: Any) -> int:
    """Replaces every scalar f32 ``math.exp`` in ``module`` (a torch-mlir
    module, inside its context) by arithmetic; returns how many."""
    from torch_mlir import ir
    from torch_mlir.dialects import arith

    f32 = ir.F32Type.get()
    i32 = ir.IntegerType.get_signless(32)
    found: list[Any] = []

    def collect(op: Any) -> Any:
        if op.name == "math.exp" and len(op.results) == 1 and op.results[0].type == f32:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(collect)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            def fconst(v: float) -> Any:
                return arith.constant(f32, ir.FloatAttr.get(f32, v))

            def iconst(v: int) -> Any:
                return arith.constant(i32, ir.IntegerAttr.get(i32, v))

            x = op.operands[0]
            xc = arith.minimumf(arith.maximumf(x, fconst(_MIN_INPUT)), fconst(_MAX_INPUT))
            # Multiply-adds that LLVM may fuse (fastmath contract): half the
            # vector ops, and kernels with an exp are bound by the vector
            # units. (math.fma would not survive: the pipeline's
            # math-expand-ops splits it into a multiply and an add.)
            contract = ir.Attribute.parse("#arith.fastmath<contract>")

            def fma(a: Any, b: Any, c: Any) -> Any:
                return arith.addf(arith.mulf(a, b, fastmath=contract), c, fastmath=contract)

            shifted = fma(xc, fconst(_LOG2E), fconst(_SHIFTER))
            k = arith.subf(shifted, fconst(_SHIFTER))
            r = fma(k, fconst(-_LN2_HI), xc)
            r = fma(k, fconst(-_LN2_LO), r)
            poly = fconst(_POLY[0])
            for c in _POLY[1:]:
                poly = fma(poly, r, fconst(c))
            p = arith.addf(fma(poly, arith.mulf(r, r), r), fconst(1.0))
            k_int = arith.subi(arith.bitcast(i32, shifted), iconst(_SHIFTER_BITS))
            # 2**k as 2**(k >> 1) * 2**(k - (k >> 1)): both factors are normal
            # floats for every k in [-150, 128].
            k_half = arith.shrsi(k_int, iconst(1))
            for e in (k_half, arith.subi(k_int, k_half)):
                p = arith.mulf(p, arith.bitcast(f32, arith.shli(arith.addi(e, iconst(127)), iconst(23))))
            result = p
            overflow = arith.cmpf(arith.CmpFPredicate.OGT, x, fconst(_MAX_INPUT))
            result = arith.select(overflow, fconst(float("inf")), result)
        op.results[0].replace_all_uses_with(result)
        op.erase()
    return len(found)


_RECIPROCAL_ASSERT = "unimplemented: tensor with zero element"


def drop_float_reciprocal_asserts(module: Any) -> int:
    """Erases torch-mlir's ``cf.assert`` of a non-zero divisor where the
    divisor is a float (see the module's docstring); returns how many."""
    from torch_mlir import ir

    found: list[Any] = []

    def collect(op: Any) -> Any:
        if op.name == "cf.assert" and ir.StringAttr(op.attributes["msg"]).value == _RECIPROCAL_ASSERT:
            condition = op.operands[0].owner
            if getattr(condition, "name", None) == "arith.cmpf":
                found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(collect)
    for op in found:
        op.erase()
    return len(found)
