"""Python meta kernels stay quiet while they shape an npu op's outputs.

The generic executor runs an op's meta kernel to shape the outputs of the
CPU kernel it queues (Note [Meta kernels shape the CPU kernel's outputs],
csrc/OutputShapes.h) and drops the meta kernel's C++ warnings: the CPU
kernel warns where the CPU would. A Python meta kernel built on
torch._prims_common's out= wrapper warned through Python's warnings module
instead, so the first npu call of such an op with an out= of the wrong size
(torch.ceil(a, out=torch.empty(2)) for three elements, abs or angle of a
complex tensor) warned twice where the CPU warns once. So did angle's meta
kernel, which resizes its out= through torch._resize_output_: a C++ warning,
but one raised inside a Python call, which reports it to Python.
"""

from __future__ import annotations

import functools
from typing import Any


def install() -> None:
    """Makes the out= resizes of Python meta kernels quiet while npu outputs
    are shaped (idempotent)."""
    _quiet_resize_output_check()
    _quiet_resize_output()


def _quiet_resize_output_check() -> None:
    try:
        from torch._prims_common import same_shape, wrappers
    except ImportError:  # a torch without Python references
        return
    check = getattr(wrappers, "_resize_output_check", None)
    if check is None or getattr(check, "_npu_quiet_when_shaping", False):
        return
    from . import _C

    shaping_npu_outputs = _C._shaping_npu_outputs

    @functools.wraps(check)
    def resize_output_check(out: Any, shape: Any) -> bool:
        if shaping_npu_outputs():
            # The check's answer without its warning: the CPU kernel warns.
            return not same_shape(out.shape, shape)
        return check(out, shape)

    resize_output_check._npu_quiet_when_shaping = True  # type: ignore[attr-defined]
    wrappers._resize_output_check = resize_output_check


def _quiet_resize_output() -> None:
    import torch

    resize = getattr(torch, "_resize_output_", None)
    if resize is None or getattr(resize, "_npu_quiet_when_shaping", False):
        return
    from . import _C

    shaping_npu_outputs = _C._shaping_npu_outputs

    @functools.wraps(resize)
    def resize_output(out: Any, size: Any, device: Any) -> Any:
        if shaping_npu_outputs() and out.numel() != 0 and tuple(out.shape) != tuple(size):
            # A meta tensor standing for the npu out=: emptied first, it is
            # resized without the warning (the CPU kernel warns).
            out.resize_(0)
        return resize(out, size, device)

    resize_output._npu_quiet_when_shaping = True  # type: ignore[attr-defined]
    torch._resize_output_ = resize_output
