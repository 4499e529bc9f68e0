"""Innermost-dimension reductions spelled so that their loops vectorise.

Note [Innermost reductions in lanes]
torch-mlir lowers a reduction over the last dimension (sum, amax, any) to a
linalg reduction whose innermost loop is the reduced dimension; once
converted to affine loops, every iteration loads, combines and stores the
one output element, a loop ``affine-super-vectorize`` cannot vectorise (LLVM
cannot either: a float sum may not be reassociated). It then runs at one
element per add latency (sum: about 4x slower than ATen's), or the
vectoriser picks the outer, parallel loop and reads the input with a
stride of a whole row, element by element (any).

A program's sum, amax, amin or any over a last dimension of K elements, K a
multiple of LANES (and at least 2 * LANES), is therefore written as the
same reduction over a view of shape (..., K / LANES, LANES): first over the
K / LANES dimension, whose innermost loop is the LANES-wide dimension,
parallel and contiguous, so it vectorises; then over the LANES partial
results. A sum differs from a sequential one only in rounding (the order
of the additions, as ATen's own vectorised sum differs); amax, amin and any
are exact (any is reduced as the amax of its bytes: see any_in_bytes). Every backend of the program (MLIR, the eager fallback) computes
it this way, so the kernel's values do not depend on whether it was
compiled.
"""

from __future__ import annotations

from typing import Any

import torch

# Vector lanes of f32 the kernels are vectorised for (affine-super-vectorize's
# virtual-vector-size, _mlir.PIPELINE). 16, not the 8 of an AVX2 register:
# LLVM splits each vector op into two independent register-wide ones, and
# that second chain of work fills the vector units while the first waits on
# a result (exp and erf, chains of ~35 dependent ops, ran 1.4x faster).
LANES = 16

aten = torch.ops.aten

# Reductions written in lanes -> the op both of their steps use (its
# signature: input, dims, keepdim).
_LANE_OPS = {
    aten.sum.dim_IntList: aten.sum.dim_IntList,
    aten.amax.default: aten.amax.default,
    aten.amin.default: aten.amin.default,
    aten.any.dims: aten.any.dims,
    aten.any.dim: aten.any.dims,
}
_NAMES = {aten.sum.dim_IntList: "sum", aten.amax.default: "amax", aten.amin.default: "amin",
          aten.any.dims: "any"}


def is_lane_reduction(node: torch.fx.Node) -> bool:
    """Whether ``node`` is a sum, amax, amin or any over only its input's
    last dimension, with a static size of at least 2 * LANES that LANES
    divides (and, for sums, a float input: integer sums are exact in any
    order, but they are not where the time goes)."""
    if node.target not in _LANE_OPS or node.kwargs or len(node.args) < 2:
        return False
    source = node.args[0]
    value = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
    if not isinstance(value, torch.Tensor) or value.dim() == 0:
        return False
    if node.target is aten.sum.dim_IntList and not value.is_floating_point():
        return False
    dims = node.args[1]
    dims = [dims] if isinstance(dims, int) else dims
    if not isinstance(dims, (list, tuple)) or len(dims) != 1 or not isinstance(dims[0], int):
        return False
    if dims[0] % value.dim() != value.dim() - 1:
        return False
    size = value.shape[-1]
    return isinstance(size, int) and size >= 2 * LANES and size % LANES == 0


def lane_reduce(op: str, x: torch.Tensor, keepdim: bool = False) -> torch.Tensor:
    """``op`` (sum, amax, amin or any) over the last dimension of ``x`` as
    LANES partial results reduced at the end (Note [Innermost reductions in
    lanes]); the last dimension's size is a multiple of LANES."""
    if op == "any":
        # In bytes: see any_in_bytes.
        return aten.ne.Scalar(lane_reduce("amax", aten._to_copy.default(x, dtype=torch.uint8), keepdim), 0)
    reduce = aten.sum.dim_IntList if op == "sum" else getattr(aten, op).default
    *outer, size = x.shape
    lanes = aten.reshape.default(x, [*outer, size // LANES, LANES])
    partial = reduce(lanes, [len(outer)], False)
    return reduce(partial, [len(outer)], keepdim)


def any_in_bytes(x: torch.Tensor, dims: Any, keepdim: bool = False) -> torch.Tensor:
    """``any`` as the amax of ``x`` in uint8: a kernel's i1 buffers are
    packed bits once vectorised, which a later read at other positions
    misreads (Note [Bool tensors cross the kernel boundary as bytes],
    kernel.py); a uint8 accumulator is one byte per element."""
    dims = [dims] if isinstance(dims, int) else list(dims)
    return aten.ne.Scalar(aten.amax.default(aten._to_copy.default(x, dtype=torch.uint8), dims, keepdim), 0)


def any_call(args: list[str], node: torch.fx.Node) -> str | None:
    """The program source of an ``any`` over given dimensions, in bytes
    (:func:`any_in_bytes`), or None for another op."""
    if node.target not in (aten.any.dims, aten.any.dim) or node.kwargs or len(node.args) < 2:
        return None
    return f"_any_in_bytes({', '.join(args)})"


def lane_reduction_call(args: list[str], node: torch.fx.Node) -> str:
    """The program source of ``node`` (see :func:`is_lane_reduction`) as a
    reduction in lanes."""
    keepdim = node.args[2] if len(node.args) > 2 else False
    name = _NAMES[_LANE_OPS[node.target]]
    return f"_lane_reduce({name!r}, {args[0]}, {bool(keepdim)})"


def scope() -> dict[str, Any]:
    """The names program sources use for reductions in lanes."""
    return {"_lane_reduce": lane_reduce, "_any_in_bytes": any_in_bytes}
