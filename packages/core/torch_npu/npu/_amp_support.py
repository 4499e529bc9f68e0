"""Which dtypes autocast supports on npu.

``torch.autocast("npu", ...)`` requires the device module to have
``get_amp_supported_dtype()`` even to be constructed, so it lives in core.
The autocast kernels themselves (the ``AutocastPrivateUse1`` dispatch key)
come from a plugin (torch-npu-ops), which registers the dtypes it handles
with :func:`_register_amp_supported_dtypes` when it loads. Core never imports
the plugin: without one, the list is empty and torch disables autocast on
npu with a warning instead of failing inside the dispatcher.
"""

from __future__ import annotations

import threading
import warnings
from typing import Iterable, List

import torch

_lock = threading.Lock()
_supported: List[torch.dtype] = []


def get_amp_supported_dtype() -> List[torch.dtype]:
    """The lower-precision dtypes ``torch.autocast("npu", dtype=...)`` accepts.

    ``[torch.float16, torch.bfloat16]`` with torch-npu-ops installed; empty
    (with a warning) when no installed plugin provides autocast kernels, in
    which case torch turns autocast on npu off.
    """
    with _lock:
        supported = list(_supported)
    if not supported:
        warnings.warn(
            "autocast on npu needs the torch-npu-ops package, which is not "
            "loaded (install it with `pip install torch-npu-ops`); autocast "
            "on npu is disabled.",
            stacklevel=2,
        )
    return supported


def _register_amp_supported_dtypes(dtypes: Iterable[torch.dtype]) -> None:
    """Called by a plugin once its autocast kernels for npu are registered.

    Adds ``dtypes`` to what :func:`get_amp_supported_dtype` reports; calling
    it again with the same dtypes changes nothing.
    """
    with _lock:
        for dtype in dtypes:
            if not isinstance(dtype, torch.dtype):
                raise TypeError(f"expected a torch.dtype, got {type(dtype).__name__}")
            if dtype not in _supported:
                _supported.append(dtype)
