"""``npu_swiglu``: the SwiGLU activation."""

from __future__ import annotations

from typing import Any, Tuple

import torch
from torch import Tensor

from ._common import check_floating, compute_dtype
from ._schema import Args, SchemaOp

_SWIGLU = SchemaOp("npu_swiglu(Tensor x, SymInt dim=-1) -> Tensor")


def _check(x: Tensor, dim: int) -> None:
    check_floating("npu_swiglu", "x", x)
    if x.dim() == 0:
        raise ValueError("npu_swiglu: x must have at least one dimension")
    if not -x.dim() <= dim < x.dim():
        raise IndexError(
            f"npu_swiglu: dim {dim} is out of range for a tensor of {x.dim()} dimensions"
        )
    if x.shape[dim] % 2 != 0:
        raise ValueError(
            f"npu_swiglu: x.shape[{dim}] must be even, got shape {tuple(x.shape)}"
        )


def _out_shape(x: Tensor, dim: int) -> list:
    shape = list(x.shape)
    shape[dim] = shape[dim] // 2
    return shape


@_SWIGLU.register_kernel
def _swiglu(args: Args) -> Tensor:
    x, dim = args.x, args.dim
    _check(x, dim)
    a, b = x.to(compute_dtype(x.dtype)).chunk(2, dim=dim)
    return (torch.nn.functional.silu(a) * b).to(x.dtype).contiguous()


@_SWIGLU.register_fake
def _swiglu_fake(args: Args) -> Tensor:
    _check(args.x, args.dim)
    return args.x.new_empty(_out_shape(args.x, args.dim))


def _setup_context(ctx: Any, args: Args, output: Tensor) -> None:
    ctx.dim = args.dim
    ctx.save_for_backward(args.x)


def _backward(ctx: Any, grad: Tensor) -> Tuple[Any, ...]:
    (x,) = ctx.saved_tensors
    ct = compute_dtype(x.dtype)
    a, b = x.to(ct).chunk(2, dim=ctx.dim)
    g = grad.to(ct)
    sig = torch.sigmoid(a)
    silu = a * sig
    grad_a = g * b * sig * (1 + a * (1 - sig))
    grad_b = g * silu
    return torch.cat((grad_a, grad_b), dim=ctx.dim).to(x.dtype), None


_SWIGLU.register_autograd(_backward, setup_context=_setup_context)


npu_swiglu = _SWIGLU.python_function(
    __name__,
    """SwiGLU: splits ``x`` into halves ``a, b`` along ``dim`` and returns
    ``silu(a) * b`` (``silu(a) = a * sigmoid(a)``, i.e. Swish).

    Args:
        x: the input; ``x.shape[dim]`` must be even.
        dim: the dimension to split (default: the last).

    Returns:
        A tensor of the dtype of ``x`` whose size along ``dim`` is half that
        of ``x``. Differentiable in ``x``.
    """,
)
