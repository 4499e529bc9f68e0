"""``npu_dtype_cast``, ``npu_format_cast`` and ``get_npu_format``.

Ascend NPUs keep some tensors in private memory layouts ("formats", e.g.
FRACTAL_NZ for matmul weights). torch-npu stores every tensor in the plain
ND layout of PyTorch's strides: ``get_npu_format`` always reports
``ACL_FORMAT_ND`` and ``npu_format_cast`` returns a copy whatever the format
asked for, so code written for Ascend's torch_npu that casts formats for
speed runs unchanged.
"""

from __future__ import annotations

from typing import Any, Tuple

import torch
from torch import Tensor

from ._common import qualname

#: aclFormat values of CANN (the ``acl_format`` argument of npu_format_cast).
ACL_FORMAT_UNDEFINED = -1
ACL_FORMAT_NCHW = 0
ACL_FORMAT_NHWC = 1
ACL_FORMAT_ND = 2
ACL_FORMAT_NC1HWC0 = 3
ACL_FORMAT_FRACTAL_Z = 4
ACL_FORMAT_FRACTAL_NZ = 29
ACL_FORMAT_NCDHW = 30


# -- npu_dtype_cast -----------------------------------------------------------


@torch.library.custom_op(qualname("npu_dtype_cast"), mutates_args=())
def _npu_dtype_cast(input: Tensor, dtype: torch.dtype) -> Tensor:
    # Always a new tensor: a custom op's output may not alias its input.
    return input.to(dtype, copy=True)


@_npu_dtype_cast.register_fake
def _npu_dtype_cast_fake(input: Tensor, dtype: torch.dtype) -> Tensor:
    return torch.empty_like(input, dtype=dtype)


def _dtype_cast_setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
    ctx.input_dtype = inputs[0].dtype


def _dtype_cast_backward(ctx: Any, grad: Tensor) -> Tuple[Any, ...]:
    if not ctx.input_dtype.is_floating_point and not ctx.input_dtype.is_complex:
        return None, None
    return grad.to(ctx.input_dtype), None


_npu_dtype_cast.register_autograd(_dtype_cast_backward, setup_context=_dtype_cast_setup_context)


def npu_dtype_cast(input: Tensor, dtype: torch.dtype) -> Tensor:
    """Casts ``input`` to ``dtype``, like ``input.to(dtype)``.

    Always returns a new tensor (also when ``input`` already has ``dtype``).
    Differentiable: the gradient is cast back to the dtype of ``input``.
    """
    return torch.ops.npu.npu_dtype_cast(input, dtype)


# -- npu_format_cast ----------------------------------------------------------


@torch.library.custom_op(qualname("npu_format_cast"), mutates_args=())
def _npu_format_cast(input: Tensor, acl_format: int) -> Tensor:
    return input.clone()


@_npu_format_cast.register_fake
def _npu_format_cast_fake(input: Tensor, acl_format: int) -> Tensor:
    return torch.empty_like(input)


def _format_cast_backward(ctx: Any, grad: Tensor) -> Tuple[Any, ...]:
    return grad, None


_npu_format_cast.register_autograd(_format_cast_backward)


def npu_format_cast(input: Tensor, acl_format: int) -> Tensor:
    """Returns ``input`` in the memory format ``acl_format`` (an aclFormat
    value such as 2 = ND, 29 = FRACTAL_NZ).

    torch-npu keeps every tensor in the ND layout, so this returns a copy of
    ``input`` (same shape, strides and values) for any ``acl_format``; the
    copy still reports ``get_npu_format(...) == 2``. Differentiable
    (identity gradient).
    """
    return torch.ops.npu.npu_format_cast(input, acl_format)


def npu_format_cast_(input: Tensor, acl_format: int) -> Tensor:
    """In-place :func:`npu_format_cast`: ``input`` is already ND, so this
    returns ``input`` itself unchanged."""
    if not isinstance(acl_format, int) and not isinstance(acl_format, Tensor):
        raise TypeError(f"npu_format_cast_: acl_format must be an int, got {type(acl_format)}")
    return input


def get_npu_format(tensor: Tensor) -> int:
    """The aclFormat of ``tensor``'s memory layout: always 2
    (``ACL_FORMAT_ND``), the only layout torch-npu uses."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"get_npu_format: expected a Tensor, got {type(tensor).__name__}")
    return ACL_FORMAT_ND
