"""``torch.npu.amp.autocast``, ``custom_fwd`` and ``custom_bwd``: the npu
spellings of the device-generic ``torch.autocast("npu", ...)`` and
``torch.amp.custom_fwd/custom_bwd(device_type="npu")``.

Ascend's torch_npu provides them as its own API, not as deprecated aliases,
and code written for it (and accelerate, which calls
``torch.npu.amp.GradScaler`` for npu) uses them in every training step:
they do not warn, unlike ``torch.cuda.amp``'s.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

__all__ = ["autocast", "custom_bwd", "custom_fwd"]

_DEVICE = "npu"


class autocast(torch.amp.autocast_mode.autocast):
    """``torch.autocast("npu", ...)`` with torch_npu's default dtype
    (float16). Usable as a context manager or a decorator, exactly like
    :class:`torch.autocast`; see there for the casting rules."""

    def __init__(
        self,
        enabled: bool = True,
        dtype: torch.dtype = torch.float16,
        cache_enabled: bool = True,
    ) -> None:
        super().__init__(_DEVICE, enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def custom_fwd(
    fwd: Optional[Callable[..., Any]] = None,
    *,
    cast_inputs: Optional[torch.dtype] = None,
) -> Callable[..., Any]:
    """``torch.amp.custom_fwd(fwd, device_type="npu", cast_inputs=...)``.

    Decorates the ``forward`` of a custom autograd Function: with
    ``cast_inputs``, inside an npu autocast region its floating-point npu
    inputs are cast to that dtype and it runs with autocast off.
    """
    return torch.amp.custom_fwd(fwd, device_type=_DEVICE, cast_inputs=cast_inputs)


def custom_bwd(bwd: Optional[Callable[..., Any]] = None) -> Callable[..., Any]:
    """``torch.amp.custom_bwd(bwd, device_type="npu")``: runs ``backward``
    with the npu autocast state of the matching ``forward``."""
    return torch.amp.custom_bwd(bwd, device_type=_DEVICE)
