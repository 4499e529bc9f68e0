"""Arithmetic of a float16 or bfloat16 tensor with a number, computed with
the number in float32 as eager does.

Note [Half-precision arithmetic with a number in float32]
Eager npu (ATen's CPU kernels) multiplies, divides, adds or subtracts a
float16 / bfloat16 tensor and a Python number with the number in float32
(the op's "opmath" type) and rounds the result once; so does Inductor's own
code generation. torch-mlir converts the number to the tensor's half type
first: pi became 3.140625, and sinc's backward, which starts from pi * x,
rounded pi * (-6.625) to -20.75 where eager has -20.875 and was 0.1 off
eager's gradient (silently; both are far from a float64 reference there, by
the cancellation of the formula in half precision). A program computes such
an op of a half-precision result in float32, with its half tensor operands
converted (exactly) to float32, and rounds the result once: eager's value,
bit for bit. Only numbers the half type cannot hold exactly are concerned:
with any other number the half-precision op is already eager's. A number
that is the first operand (``1.1 - x``, ``sub(1.1, x)`` in the graph) is
left alone: eager rounds that one to the half type too (only a second
operand, and ``alpha``, stay in float32).
"""

from __future__ import annotations

import torch

_HALF = (torch.float16, torch.bfloat16)
_ARITHMETIC = frozenset({
    torch.ops.aten.add.Tensor, torch.ops.aten.add.Scalar, torch.ops.aten.sub.Tensor, torch.ops.aten.sub.Scalar,
    torch.ops.aten.mul.Tensor, torch.ops.aten.mul.Scalar, torch.ops.aten.div.Tensor, torch.ops.aten.div.Scalar,
})


def _inexact_in(number: object, dtype: torch.dtype) -> bool:
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return False
    return float(torch.tensor(float(number), dtype=torch.float64).to(dtype).double()) != float(number)


def computes_with_a_half_number(node: torch.fx.Node) -> bool:
    """Whether ``node`` is arithmetic whose float16 / bfloat16 result has a
    number operand (or ``alpha``) its half type cannot hold exactly (Note
    [Half-precision arithmetic with a number in float32])."""
    value = node.meta.get("val")
    if node.target not in _ARITHMETIC or not isinstance(value, torch.Tensor) or value.dtype not in _HALF:
        return False
    if not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False  # a number first (``1.1 - x``): eager rounds it too
    return any(_inexact_in(a, value.dtype) for a in (*node.args[1:], *node.kwargs.values()))


def float32_call(node: torch.fx.Node, name: str, args: list[str]) -> str:
    """The source of ``node``'s call computed in float32 and rounded to its
    half type (``name``: the op's qualified name, ``args``: its printed
    arguments, keywords last as ``key=value``)."""
    value = node.meta["val"]
    wide = []
    for arg, source in zip(node.args, args):
        arg_value = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
        if isinstance(arg_value, torch.Tensor) and arg_value.dtype in _HALF:
            source = f"torch.ops.aten._to_copy.default({source}, dtype=torch.float32)"
        wide.append(source)
    wide += args[len(node.args):]
    return f"torch.ops.aten._to_copy.default({name}({', '.join(wide)}), dtype={value.dtype})"
