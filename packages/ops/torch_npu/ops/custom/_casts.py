"""``npu_dtype_cast``, ``npu_format_cast``, ``get_npu_format`` and ``Format``.

Ascend NPUs keep some tensors in private memory layouts ("formats", e.g.
FRACTAL_NZ for matmul weights). torch-npu keeps the values of every tensor
in PyTorch's strided layout and records the format as metadata of the npu
tensor (core's csrc/aten/NPUFormat.h): ``npu_format_cast`` returns a copy
tagged with the format asked for, ``get_npu_format`` reports it (the base
format, NCHW / NCDHW / ND by the number of dimensions, for a tensor never
cast), and shallow copies and ``torch.save`` keep it. So code written for
Ascend's torch_npu that casts formats for speed, and checks them, runs
unchanged with the same values.
"""

from __future__ import annotations

import enum
from typing import Any, Tuple, Union

import torch
from torch import Tensor

from torch_npu import _C as _core

from ._schema import Args, SchemaOp

#: ``torch_npu.Format``: CANN's aclFormat values (the ``acl_format`` argument
#: of npu_format_cast), from core's single list.
Format = enum.IntEnum("Format", [("UNDEFINED", -1), *_core._npu_formats()], module=__name__)
Format.__doc__ = "Storage formats of npu tensors (CANN's aclFormat values)."
Format.__str__ = lambda self: self.name  # type: ignore[method-assign]

ACL_FORMAT_ND = int(Format.ND)


# -- npu_dtype_cast -----------------------------------------------------------


_DTYPE_CAST = SchemaOp("npu_dtype_cast(Tensor input, ScalarType dtype) -> Tensor")


@_DTYPE_CAST.register_kernel
def _dtype_cast(args: Args) -> Tensor:
    # Always a new tensor: a custom op's output may not alias its input.
    return args.input.to(args.dtype, copy=True)


@_DTYPE_CAST.register_fake
def _dtype_cast_fake(args: Args) -> Tensor:
    return torch.empty_like(args.input, dtype=args.dtype)


def _dtype_cast_setup_context(ctx: Any, args: Args, output: Tensor) -> None:
    ctx.input_dtype = args.input.dtype


def _dtype_cast_backward(ctx: Any, grad: Tensor) -> Tuple[Any, ...]:
    if not ctx.input_dtype.is_floating_point and not ctx.input_dtype.is_complex:
        return None, None
    return grad.to(ctx.input_dtype), None


_DTYPE_CAST.register_autograd(_dtype_cast_backward, setup_context=_dtype_cast_setup_context)


npu_dtype_cast = _DTYPE_CAST.python_function(
    __name__,
    """Casts ``input`` to ``dtype``, like ``input.to(dtype)``.

    Always returns a new tensor (also when ``input`` already has ``dtype``).
    Differentiable: the gradient is cast back to the dtype of ``input``.
    """,
)


# -- npu_format_cast ----------------------------------------------------------


_FORMAT_CAST = SchemaOp("npu_format_cast(Tensor input, SymInt acl_format) -> Tensor")


@_FORMAT_CAST.register_kernel
def _format_cast(args: Args) -> Tensor:
    output = args.input.clone()
    if output.device.type == "npu":
        _core._set_npu_format(output, args.acl_format)
    # Formats describe npu memory: a CPU tensor (a CPU reference run of
    # npu code) gets a plain copy.
    return output


@_FORMAT_CAST.register_fake
def _format_cast_fake(args: Args) -> Tensor:
    return torch.empty_like(args.input)


def _format_cast_backward(ctx: Any, grad: Tensor) -> Tuple[Any, ...]:
    return grad, None


_FORMAT_CAST.register_autograd(_format_cast_backward)


# Written out rather than generated: it converts ``acl_format`` (a Format
# member, or any int-like) to the int of the schema. test_custom_ops checks
# that its signature stays the schema's.
def npu_format_cast(input: Tensor, acl_format: int) -> Tensor:
    """Returns a copy of npu tensor ``input`` in the storage format
    ``acl_format`` (a :class:`Format` value, e.g. 29 = FRACTAL_NZ):
    ``get_npu_format`` of the result reports it. The values, shape and
    strides are those of ``input``. Differentiable (identity gradient).

    A value that is not a format, or a format that does not suit the
    tensor's dimensions (FRACTAL_NZ needs at least 2, NC1HWC0 exactly 4),
    raises ValueError. A CPU tensor is copied as it is (formats describe
    npu memory; ``get_npu_format`` accepts only npu tensors).
    """
    return torch.ops.npu.npu_format_cast(input, int(acl_format))


def npu_format_cast_(input: Tensor, acl_format: Union[int, Tensor]) -> Tensor:
    """In-place :func:`npu_format_cast`: gives ``input`` itself the format
    ``acl_format`` (a :class:`Format` value, or a tensor whose format to
    take) and returns it."""
    if isinstance(acl_format, Tensor):
        acl_format = _core._get_npu_format(acl_format)
    if not isinstance(acl_format, int):
        raise TypeError(f"npu_format_cast_: acl_format must be an int or an npu tensor, got {type(acl_format).__name__}")
    _core._set_npu_format(input, int(acl_format))
    return input


def get_npu_format(tensor: Tensor) -> Format:
    """The storage :class:`Format` of npu tensor ``tensor``: what
    :func:`npu_format_cast` gave it, else its base format (NCHW for 4-d
    tensors, NCDHW for 5-d ones, ND otherwise)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"get_npu_format: expected a Tensor, got {type(tensor).__name__}")
    return Format(_core._get_npu_format(tensor))
