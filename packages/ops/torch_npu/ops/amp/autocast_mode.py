"""``torch.npu.amp.autocast``, ``custom_fwd`` and ``custom_bwd``: the npu
spellings of ``torch.cuda.amp``'s, kept for code written for Ascend's
torch_npu. Like CUDA's, they are deprecated in favour of the device-generic
``torch.autocast("npu", ...)`` and ``torch.amp.custom_fwd/custom_bwd``.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Optional

import torch

__all__ = ["autocast", "custom_bwd", "custom_fwd"]

_DEVICE = "npu"


class autocast(torch.amp.autocast_mode.autocast):
    """``torch.autocast("npu", ...)`` with CUDA-style defaults (float16).

    Usable as a context manager or a decorator, exactly like
    :class:`torch.autocast`; see there for the casting rules.

    .. deprecated::
        Use ``torch.autocast("npu", dtype=...)`` (or ``torch.amp.autocast``);
        this alias warns with a FutureWarning, as ``torch.cuda.amp.autocast``
        does.
    """

    def __init__(
        self,
        enabled: bool = True,
        dtype: torch.dtype = torch.float16,
        cache_enabled: bool = True,
    ) -> None:
        warnings.warn(
            "`torch.npu.amp.autocast(args...)` is deprecated. "
            "Please use `torch.amp.autocast('npu', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
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

    .. deprecated::
        Use ``torch.amp.custom_fwd(device_type="npu")``.
    """
    warnings.warn(
        "`torch.npu.amp.custom_fwd(args...)` is deprecated. "
        "Please use `torch.amp.custom_fwd(args..., device_type='npu')` instead.",
        FutureWarning,
        stacklevel=2,
    )
    return torch.amp.custom_fwd(fwd, device_type=_DEVICE, cast_inputs=cast_inputs)


def custom_bwd(bwd: Optional[Callable[..., Any]] = None) -> Callable[..., Any]:
    """``torch.amp.custom_bwd(bwd, device_type="npu")``: runs ``backward``
    with the npu autocast state of the matching ``forward``.

    .. deprecated::
        Use ``torch.amp.custom_bwd(device_type="npu")``.
    """
    warnings.warn(
        "`torch.npu.amp.custom_bwd(args...)` is deprecated. "
        "Please use `torch.amp.custom_bwd(args..., device_type='npu')` instead.",
        FutureWarning,
        stacklevel=2,
    )
    return torch.amp.custom_bwd(bwd, device_type=_DEVICE)
