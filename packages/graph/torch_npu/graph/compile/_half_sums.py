"""Sums and products of half-precision values accumulate in float32.

Note [Half-precision reductions accumulate in float32]
torch-mlir lowers ``sum`` (and ``prod``, ``mean``, ``cumsum``, the average
pools) of a float16 or bfloat16 tensor to a linalg reduction whose
accumulator has the tensor's own type: every partial sum was rounded to 11
(float16) or 8 (bfloat16) significant bits, so once the sum outgrows the
addends they are lost. The compiled sum of 4096 bfloat16 ones was 256 and of
float16 ones 2048, and the variance of 125 bfloat16 values near 5 was 2% off
and avg_pool2d's window sums of bfloat16 4% off, silently. Eager npu (ATen's
CPU kernels), like CUDA and like Inductor's own code generation, accumulates
half-precision reductions in float32 and rounds the result once. A program
does the same: the operand is converted to float32, the op reduces in
float32 (a ``dtype=`` of the half type becomes float32), and its result is
converted back; a sum over the last dimension keeps its lanes (Note
[Innermost reductions in lanes]), of float32 values.

mean and var_mean (and var) reach a program spelled out by the npu post-grad
pass (_passes.py) as sums, divisions, differences and squares, and there
every step, not only the sums, is computed in float32 for a half operand:
the pass converts the operand to float32 and the results back. Each step in
the half type had rounded its result: the sum of 4096 float16 values near
2048 overflowed before the division that makes it a mean, the sum of squares
of 4096 float16 values in [-9, 9] overflowed (var gave inf where eager gives
27), so did each square of a difference above 256, and the variance of
bfloat16 values alternating between 256 and 258 was 2, not 1 (their mean,
257, rounded to 256 before the differences).

The other ops probed the same way (compiled float16 and bfloat16 programs on
rows of 4096, values whose squares exceed 65504, constant offsets) agree
with eager: norms, logsumexp, the softmaxes, the norm layers and the losses
are decomposed by PyTorch into steps that convert half operands to float32
themselves (or round where eager's kernels round), the pools and cumulative
sums are reductions of ``_ACCUMULATING``, and addcmul, glu and atan2 gave
eager's values.

Pointwise steps between them (a decomposition's, Dynamo's split of
``addcdiv``, a user's chain) are computed in float32 too, and the result of
such a reduction stays float32 for the steps after it in the group (Note
[Half-precision pointwise work in float32], _half_in_float32.py).
"""

from __future__ import annotations

import torch
import torch.fx

HALF_DTYPES = (torch.float16, torch.bfloat16)

# The reductions (and scans) whose accumulator torch-mlir gives the
# operand's type; amax, amin, argmax and the like are exact in any type.
_ACCUMULATING = {"sum", "nansum", "prod", "mean", "cumsum", "cumprod", "avg_pool1d", "avg_pool2d", "avg_pool3d",
                 "_adaptive_avg_pool2d", "_adaptive_avg_pool3d"}


def accumulates_in_half(node: torch.fx.Node) -> bool:
    """Whether ``node`` reduces a half-precision tensor into a result of that
    type (Note [Half-precision reductions accumulate in float32])."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or target._opname not in _ACCUMULATING:
        return False
    if node.kwargs.get("out") is not None or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    value, operand = node.meta.get("val"), node.args[0].meta.get("val")
    return (isinstance(value, torch.Tensor) and isinstance(operand, torch.Tensor)
            and value.dtype in HALF_DTYPES and operand.dtype in HALF_DTYPES)


def float32_arguments(node: torch.fx.Node, args: list[str]) -> list[str]:
    """``node``'s printed arguments (``args``: positional, then ``k=v``)
    with the operand converted to float32 and a ``dtype`` of the result's
    half type made float32."""
    half = node.meta["val"].dtype
    converted = [f"torch.ops.aten._to_copy.default({args[0]}, dtype=torch.float32)"]
    for source in args[1:]:
        converted.append("dtype=torch.float32" if source == f"dtype={half}" else source)
    return converted
