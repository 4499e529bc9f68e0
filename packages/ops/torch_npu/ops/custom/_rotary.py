"""``npu_rotary_mul``: applies rotary position embedding."""

from __future__ import annotations

from typing import Any, Tuple

import torch
from torch import Tensor

from ._common import check_floating, compute_dtype, sum_to
from ._schema import Args, SchemaOp

_ROTARY_MUL = SchemaOp(
    'npu_rotary_mul(Tensor x, Tensor r1, Tensor r2, str rotary_mode="half") -> Tensor'
)

_MODES = ("half", "interleave")


def _check(x: Tensor, r1: Tensor, r2: Tensor, rotary_mode: str) -> None:
    for arg, t in (("x", x), ("r1", r1), ("r2", r2)):
        check_floating("npu_rotary_mul", arg, t)
    if rotary_mode not in _MODES:
        raise ValueError(
            f"npu_rotary_mul: rotary_mode must be one of {_MODES}, got {rotary_mode!r}"
        )
    if x.dim() == 0 or x.shape[-1] % 2 != 0:
        raise ValueError(
            f"npu_rotary_mul: the last dimension of x must be even, got shape {tuple(x.shape)}"
        )
    shape = torch.broadcast_shapes(x.shape, r1.shape, r2.shape)
    if tuple(shape) != tuple(x.shape):
        raise ValueError(
            f"npu_rotary_mul: r1 {tuple(r1.shape)} and r2 {tuple(r2.shape)} must "
            f"broadcast to the shape of x {tuple(x.shape)}"
        )


def _rotate(t: Tensor, rotary_mode: str) -> Tensor:
    """The rotation paired with r2: ``half``: ``cat(-x2, x1)`` for the halves
    x1, x2 of the last dimension; ``interleave``: ``(-x[1], x[0], -x[3],
    x[2], ...)``."""
    if rotary_mode == "half":
        t1, t2 = t.chunk(2, dim=-1)
        return torch.cat((-t2, t1), dim=-1)
    pairs = t.unflatten(-1, (-1, 2))
    return torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)


def _rotate_transposed(t: Tensor, rotary_mode: str) -> Tensor:
    """The adjoint of :func:`_rotate` (its inverse: a rotation by -90°)."""
    if rotary_mode == "half":
        t1, t2 = t.chunk(2, dim=-1)
        return torch.cat((t2, -t1), dim=-1)
    pairs = t.unflatten(-1, (-1, 2))
    return torch.stack((pairs[..., 1], -pairs[..., 0]), dim=-1).flatten(-2)


@_ROTARY_MUL.register_kernel
def _rotary_mul(args: Args) -> Tensor:
    x, r1, r2, mode = args.x, args.r1, args.r2, args.rotary_mode
    _check(x, r1, r2, mode)
    ct = compute_dtype(x.dtype, r1.dtype, r2.dtype)
    xf = x.to(ct)
    y = xf * r1.to(ct) + _rotate(xf, mode) * r2.to(ct)
    return y.to(x.dtype).contiguous()


@_ROTARY_MUL.register_fake
def _rotary_mul_fake(args: Args) -> Tensor:
    _check(args.x, args.r1, args.r2, args.rotary_mode)
    return args.x.new_empty(args.x.shape)


def _setup_context(ctx: Any, args: Args, output: Tensor) -> None:
    ctx.rotary_mode = args.rotary_mode
    ctx.save_for_backward(args.x, args.r1, args.r2)


def _backward(ctx: Any, grad: Tensor) -> Tuple[Any, ...]:
    x, r1, r2 = ctx.saved_tensors
    mode = ctx.rotary_mode
    ct = compute_dtype(x.dtype, r1.dtype, r2.dtype)
    g = grad.to(ct)
    grad_x = grad_r1 = grad_r2 = None
    if ctx.needs_input_grad[0]:
        grad_x = (g * r1.to(ct) + _rotate_transposed(g * r2.to(ct), mode)).to(x.dtype)
    if ctx.needs_input_grad[1]:
        grad_r1 = sum_to(g * x.to(ct), r1.shape).to(r1.dtype)
    if ctx.needs_input_grad[2]:
        grad_r2 = sum_to(g * _rotate(x.to(ct), mode), r2.shape).to(r2.dtype)
    return grad_x, grad_r1, grad_r2, None


_ROTARY_MUL.register_autograd(_backward, setup_context=_setup_context)


npu_rotary_mul = _ROTARY_MUL.python_function(
    __name__,
    """Rotary position embedding: ``x * r1 + rotate(x) * r2``.

    ``r1`` and ``r2`` are usually the cosine and sine tables; both must
    broadcast to the shape of ``x`` (typically ``[B, S, N, D]`` with tables of
    shape ``[1, S, 1, D]``).

    Args:
        x: the input; its last dimension ``D`` must be even.
        r1: the multiplier of ``x`` (cos).
        r2: the multiplier of the rotated ``x`` (sin).
        rotary_mode: ``"half"`` (default, GPT-NeoX / LLaMA style
            ``rotate_half``): ``rotate(x) = cat(-x[..., D/2:], x[..., :D/2])``;
            ``"interleave"`` (GPT-J style): each pair ``(x[2i], x[2i+1])``
            becomes ``(-x[2i+1], x[2i])``.

    Returns:
        A tensor of the shape and dtype of ``x``. Differentiable in ``x``,
        ``r1`` and ``r2``.
    """,
)
