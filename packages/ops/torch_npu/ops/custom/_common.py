"""Helpers shared by the custom ``npu`` ops."""

from __future__ import annotations

import torch

#: Namespace of the custom ops: ``torch.ops.npu.<name>``.
NAMESPACE = "npu"


def compute_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """The dtype the arithmetic of a fused op runs in: float32 for
    float16/bfloat16/float32 inputs (as the NPU kernels accumulate in
    float32), float64 if any input is float64."""
    out = torch.float32
    for dtype in dtypes:
        if dtype == torch.float64:
            out = torch.float64
    return out


def check_floating(name: str, arg: str, t: torch.Tensor) -> None:
    """Raises TypeError unless ``t`` has a floating-point dtype."""
    if not t.dtype.is_floating_point:
        raise TypeError(f"{name}: {arg} must be a floating-point tensor, got {t.dtype}")


def sum_to(t: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Sums ``t`` down to ``shape`` (the inverse of broadcasting ``shape`` to
    ``t.shape``)."""
    if tuple(t.shape) == tuple(shape):
        return t
    return t.sum_to_size(shape)
