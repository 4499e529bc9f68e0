"""torch.npu.set_sync_debug_mode / get_sync_debug_mode, as torch.cuda's:
which operations count is Note [Synchronizing operations]
(csrc/npu/SyncDebugMode.h)."""

from __future__ import annotations

from typing import Union

from .. import _C

_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode: Union[int, str]) -> None:
    """Makes the operations that wait for the device (``.item()``, copies
    between npu and host memory with ``non_blocking=False``, ops whose result
    sizes depend on the values such as ``nonzero``) warn (``"warn"`` or 1)
    or raise RuntimeError instead of waiting (``"error"`` or 2);
    ``"default"`` or 0 turns this off. Explicit synchronizations
    (``torch.npu.synchronize()``, streams, events) never count."""
    if isinstance(debug_mode, str):
        if debug_mode not in _MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = _MODES[debug_mode]
    if isinstance(debug_mode, bool) or not isinstance(debug_mode, int) or debug_mode not in _MODES.values():
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1 or 2 (or one of `default`, `warn`, "
                           f"`error`), got {debug_mode!r}")
    _C._set_sync_debug_mode(debug_mode)


def get_sync_debug_mode() -> int:
    """The mode set by :func:`set_sync_debug_mode`: 0, 1 or 2."""
    return int(_C._get_sync_debug_mode())
