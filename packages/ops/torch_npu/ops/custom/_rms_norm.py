"""``npu_rms_norm``: root-mean-square layer normalisation."""

from __future__ import annotations

from typing import Any, Tuple

import torch
from torch import Tensor

from ._common import check_floating, compute_dtype, sum_to
from ._schema import Args, SchemaOp

_RMS_NORM = SchemaOp(
    "npu_rms_norm(Tensor x, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)"
)


def _check(x: Tensor, gamma: Tensor) -> None:
    check_floating("npu_rms_norm", "x", x)
    check_floating("npu_rms_norm", "gamma", gamma)
    if gamma.dim() == 0 or gamma.dim() > x.dim():
        raise ValueError(
            f"npu_rms_norm: gamma must have between 1 and x.dim() = {x.dim()} "
            f"dimensions, got {gamma.dim()}"
        )
    if tuple(x.shape[x.dim() - gamma.dim() :]) != tuple(gamma.shape):
        raise ValueError(
            f"npu_rms_norm: the last dimensions of x {tuple(x.shape)} must equal "
            f"the shape of gamma {tuple(gamma.shape)}"
        )


def _rstd_shape(x: Tensor, gamma: Tensor) -> list:
    lead = x.dim() - gamma.dim()
    return list(x.shape[:lead]) + [1] * gamma.dim()


@_RMS_NORM.register_kernel
def _rms_norm(args: Args) -> Tuple[Tensor, Tensor]:
    x, gamma = args.x, args.gamma
    _check(x, gamma)
    ct = compute_dtype(x.dtype, gamma.dtype)
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    xf = x.to(ct)
    rstd = torch.rsqrt(xf.square().mean(dims, keepdim=True) + args.epsilon)
    y = (xf * rstd * gamma.to(ct)).to(x.dtype)
    return y.contiguous(), rstd.contiguous()


@_RMS_NORM.register_fake
def _rms_norm_fake(args: Args) -> Tuple[Tensor, Tensor]:
    x, gamma = args.x, args.gamma
    _check(x, gamma)
    ct = compute_dtype(x.dtype, gamma.dtype)
    return x.new_empty(x.shape), x.new_empty(_rstd_shape(x, gamma), dtype=ct)


def _setup_context(ctx: Any, args: Args, output: Tuple[Tensor, Tensor]) -> None:
    ctx.save_for_backward(args.x, args.gamma, output[1])


def _backward(ctx: Any, grad_y: Tensor, grad_rstd: Tensor) -> Tuple[Any, ...]:
    x, gamma, rstd = ctx.saved_tensors
    ct = rstd.dtype
    dims = list(range(x.dim() - gamma.dim(), x.dim()))
    count = 1
    for d in dims:
        count *= x.shape[d]
    xf = x.to(ct)
    xhat = xf * rstd
    grad_x = grad_gamma = None
    if grad_y is not None:
        gy = grad_y.to(ct)
        if ctx.needs_input_grad[0]:
            dxhat = gy * gamma.to(ct)
            grad_x = rstd * (dxhat - xhat * (dxhat * xhat).mean(dims, keepdim=True))
        if ctx.needs_input_grad[1]:
            grad_gamma = sum_to(gy * xhat, gamma.shape).to(gamma.dtype)
    if grad_rstd is not None and ctx.needs_input_grad[0]:
        # d rstd / dx = -rstd^3 * x / count
        term = grad_rstd.to(ct) * (-rstd.pow(3) / count) * xf
        grad_x = term if grad_x is None else grad_x + term
    if grad_x is not None:
        grad_x = grad_x.to(x.dtype)
    return grad_x, grad_gamma, None


_RMS_NORM.register_autograd(_backward, setup_context=_setup_context)


npu_rms_norm = _RMS_NORM.python_function(
    __name__,
    """RMSNorm: ``y = x / sqrt(mean(x**2) + epsilon) * gamma``.

    The mean is taken over the last ``gamma.dim()`` dimensions of ``x`` (whose
    sizes must equal ``gamma.shape``), in float32 for float16/bfloat16 inputs.

    Args:
        x: the input, float16, bfloat16 or float32 (float64 also works).
        gamma: the scale, of the shape of the normalised trailing dimensions.
        epsilon: added to the mean square for numerical stability.

    Returns:
        ``(y, rstd)``: ``y`` of the shape and dtype of ``x``; ``rstd`` the
        reciprocal root mean square ``1 / sqrt(mean(x**2) + epsilon)`` in
        float32, of the shape of ``x`` with the normalised dimensions set to 1.

    Differentiable in ``x`` and ``gamma`` (through ``y`` and ``rstd``).
    """,
)
