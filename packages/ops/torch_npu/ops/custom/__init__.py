"""The custom ops of Ascend's torch_npu, ``torch.ops.npu.<name>``.

Each op is a ``torch.library.custom_op`` in the ``npu`` namespace with a
fake (meta) implementation and an autograd formula, so it works in eager
mode, under autograd and under ``torch.compile``. Its module writes its
arguments once, as its schema string (``_schema.SchemaOp``): the kernel and
fake implementation receive them as one named tuple, and the public Python
function is generated from the schema. Its implementation is
composed of ATen ops, so it runs on npu tensors as device work (and on CPU
tensors as well). The plugin initialiser re-exports the Python functions
below as ``torch_npu.<name>``.
"""

from __future__ import annotations

from types import ModuleType

from ._casts import (
    ACL_FORMAT_ND,
    Format,
    get_npu_format,
    npu_dtype_cast,
    npu_format_cast,
    npu_format_cast_,
)
from ._fusion_attention import (
    dropout_keep_mask,
    npu_fusion_attention,
    npu_fusion_attention_grad,
)
from ._rms_norm import npu_rms_norm
from ._rotary import npu_rotary_mul
from ._swiglu import npu_swiglu

#: The ops registered in ``torch.ops.npu`` (each also ``torch_npu.<name>``).
CUSTOM_OPS = (
    "npu_dtype_cast",
    "npu_format_cast",
    "npu_fusion_attention",
    "npu_fusion_attention_grad",
    "npu_rms_norm",
    "npu_rotary_mul",
    "npu_swiglu",
)

#: Everything :func:`install` sets on the torch_npu module.
EXPORTS = CUSTOM_OPS + ("Format", "get_npu_format", "npu_format_cast_")


def install(torch_npu: ModuleType) -> None:
    """Sets ``torch_npu.<name>`` for every name in :data:`EXPORTS`."""
    for name in EXPORTS:
        setattr(torch_npu, name, globals()[name])


__all__ = [
    "ACL_FORMAT_ND",
    "CUSTOM_OPS",
    "EXPORTS",
    "Format",
    "dropout_keep_mask",
    "get_npu_format",
    "install",
    "npu_dtype_cast",
    "npu_format_cast",
    "npu_format_cast_",
    "npu_fusion_attention",
    "npu_fusion_attention_grad",
    "npu_rms_norm",
    "npu_rotary_mul",
    "npu_swiglu",
]
