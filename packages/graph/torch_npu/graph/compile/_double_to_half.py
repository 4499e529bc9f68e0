"""Conversions of float64 values to float16 or bfloat16 in a kernel's linalg
module, rounded through float32 as eager does.

Note [Float64 to half precision through float32]
A kernel that converts float64 values to bfloat16 (float_power's backward of
bfloat16 inputs: float_power computes in float64, and its gradients are
converted back to the inputs' dtype) holds an ``arith.truncf`` from f64 to
bf16, which LLVM lowers to a call of ``__truncdfbf2``. That function is in
libgcc only from GCC 13 on: with an older one the JIT could not resolve it,
produced no object file, and the kernel ran its aten ops eagerly with a
fallback warning ("linking the kernel failed: cannot find .../kernel.o").
Eager torch converts a double to ``c10::BFloat16`` or ``c10::Half`` through
float (their constructors take a float): rounded to float32 first, then to
the half type. Each such ``truncf`` of the module (scalar, as in linalg
bodies, or shaped) is rewritten into those two roundings before lowering:
the same values as eager, bit for bit, and calls of functions libgcc has
(``__truncsfhf2``) or none at all (bf16 from f32 is expanded by LLVM).
"""

from __future__ import annotations

from typing import Any


def _with_element(type_: Any, element: Any) -> Any:
    """``type_`` (a float, a ranked tensor or a vector of floats) with
    ``element`` as its (element) type, or None for another shaped type."""
    from torch_mlir import ir

    if isinstance(type_, ir.RankedTensorType):
        return ir.RankedTensorType.get(type_.shape, element)
    if isinstance(type_, ir.VectorType):
        return ir.VectorType.get(type_.shape, element)
    return None if isinstance(type_, ir.ShapedType) else element


def _element(type_: Any) -> Any:
    from torch_mlir import ir

    return type_.element_type if isinstance(type_, ir.ShapedType) else type_


def narrow_double_through_float(module: Any) -> int:
    """Rewrites each ``arith.truncf`` from f64 to f16 or bf16 in ``module``
    (a torch-mlir module, inside its context) into a truncation to f32 and
    one from f32 (Note [Float64 to half precision through float32]);
    returns how many."""
    from torch_mlir import ir
    from torch_mlir.dialects import arith

    f64, f32 = ir.F64Type.get(), ir.F32Type.get()
    halves = (ir.F16Type.get(), ir.BF16Type.get())
    found: list[Any] = []

    def collect(op: Any) -> Any:
        if (op.name == "arith.truncf" and len(op.results) == 1 and _element(op.operands[0].type) == f64
                and _element(op.results[0].type) in halves):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(collect)
    rewritten = 0
    for op in found:
        wide_type = _with_element(op.operands[0].type, f32)
        if wide_type is None:
            continue  # an unranked tensor: not in torch-mlir's kernels
        with ir.InsertionPoint(op), op.location:
            as_float = arith.truncf(wide_type, op.operands[0])
            narrowed = arith.truncf(op.results[0].type, as_float)
        op.results[0].replace_all_uses_with(narrowed)
        op.erase()
        rewritten += 1
    return rewritten
