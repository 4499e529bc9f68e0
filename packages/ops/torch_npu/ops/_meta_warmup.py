"""The background imports of Note [Python meta kernels and the first op]
(csrc/PythonMetaWarmup.h).

The runtime's initialisation (the process's first device use) calls
:func:`start`, or else the generic executor at its first op. The thread
imports what torch's Python meta kernels import on their first call
(sympy through ``torch._check``, ``torch._dynamo`` through the
decompositions), then tells the executor, which runs ops synchronously
until then. Imports are not safe across fork (a child would inherit a
module lock held by the importing thread), so a fork waits for the thread
first. ``TORCH_NPU_META_WARMUP=0`` turns this off: the first meta kernel
then imports them on the launching thread.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading

from . import _C

#: What the first Python meta kernels would import, slowest last.
MODULES = ("torch.fx.experimental.symbolic_shapes", "torch._dynamo")

_thread: threading.Thread | None = None


def _run() -> None:
    try:
        for name in MODULES:
            if name not in sys.modules:
                importlib.import_module(name)
    except Exception:  # noqa: BLE001 - the first meta kernel would import it anyway
        pass
    finally:
        _C._set_meta_kernels_ready()


def _before_fork() -> None:
    thread = _thread
    if thread is not None and thread.is_alive():
        thread.join()


def start() -> None:
    """Starts the imports on a daemon thread (once per process); marks the
    meta kernels ready at once if there is nothing to import or the warm-up
    is turned off."""
    global _thread
    if _thread is not None:
        return
    if os.environ.get("TORCH_NPU_META_WARMUP", "1") == "0" or all(name in sys.modules for name in MODULES):
        _C._set_meta_kernels_ready()
        return
    _thread = threading.Thread(target=_run, name="torch_npu-meta-warmup", daemon=True)
    _thread.start()
    os.register_at_fork(before=_before_fork)
