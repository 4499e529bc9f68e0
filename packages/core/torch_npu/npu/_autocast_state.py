"""The npu autocast state under torch_npu's names (``torch.npu.is_autocast_enabled``,
...): the same state as ``torch.is_autocast_enabled("npu")`` and
``torch.autocast("npu", ...)``."""

from __future__ import annotations

import torch


def is_autocast_enabled() -> bool:
    """Whether autocast is on for npu in this thread."""
    return torch.is_autocast_enabled("npu")


def set_autocast_enabled(enable: bool) -> None:
    """Turns autocast for npu on or off in this thread (what
    ``torch.autocast("npu")`` does on entry and exit)."""
    torch.set_autocast_enabled("npu", enable)


def get_autocast_dtype() -> torch.dtype:
    """The lower-precision dtype autocast for npu casts to."""
    return torch.get_autocast_dtype("npu")


def set_autocast_dtype(dtype: torch.dtype) -> None:
    """Sets the dtype autocast for npu casts to."""
    torch.set_autocast_dtype("npu", dtype)
