"""The background imports of Note [Python meta kernels and the first op]
(csrc/PythonMetaWarmup.h).

The runtime's initialisation (the process's first device use) calls
:func:`start`, or else the generic executor at its first op. The thread
imports what torch's Python meta kernels import on their first call
(sympy through ``torch._check``, ``torch._dynamo`` through the
decompositions), then tells the executor, which runs ops synchronously
until then. Imports are not safe across fork (a child would inherit a
module lock held by the importing thread), so a fork waits for the thread
first, and another thread's import of a torch module waits for it (Note
[Imports beside the warm-up]). ``TORCH_NPU_META_WARMUP=0`` turns this off:
the first meta kernel then imports them on the launching thread.
"""

from __future__ import annotations

import builtins
import importlib
import os
import sys
import threading

from . import _C

#: What the first Python meta kernels would import, slowest last.
MODULES = ("torch.fx.experimental.symbolic_shapes", "torch._dynamo")

_thread: threading.Thread | None = None


# Note [Imports beside the warm-up]
# torch's packages import each other in cycles (torch._dynamo and
# torch._inductor import each other at module level). When two threads enter
# such a cycle at different modules, CPython does not make one wait for the
# other: it detects the deadlock and hands one of them a partially
# initialised module, which fails as an ImportError ("cannot import name ...
# from partially initialized module") or a _DeadlockError. ``torch.compile``
# enters at torch._inductor while this thread imports torch._dynamo, so a
# script that compiled right after its first npu op failed about one run in
# six. So while the thread imports, another thread's import of a torch or
# sympy module that is not loaded yet first waits for it to finish (imports
# of loaded modules, which torch's functions make in their bodies, do not).
# The wait sits in ``builtins.__import__`` (import statements) and
# ``importlib.import_module`` (torch's lazy submodules), wrapped for that
# time only: there it comes before the import system takes any module lock,
# whereas a finder on sys.meta_path runs holding the lock of the module it
# looks for, which this thread may need next.
_WAITING_ROOTS = frozenset({"torch", "sympy"})
_builtin_import = builtins.__import__
_import_module = importlib.import_module


def _loaded(name: str, fromlist: tuple[str, ...] = ()) -> bool:
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return False
    return all(item == "*" or hasattr(module, item) for item in fromlist)


def _wait_for_imports(name: str, fromlist: tuple[str, ...] = ()) -> None:
    """Waits for the warm-up thread before an import of a torch or sympy
    module that is not fully imported yet (``name`` absolute); an import
    of a loaded module, as torch's functions make inside their bodies,
    goes on at once."""
    thread = _thread
    if thread is None or thread is threading.current_thread() or not thread.is_alive():
        return
    if name.partition(".")[0] in _WAITING_ROOTS and not _loaded(name, fromlist):
        thread.join()


def _absolute(name: str, package: str | None, level: int) -> str:
    if level == 0 or not package:
        return name
    base = package.rsplit(".", level - 1)[0]
    return f"{base}.{name}" if name else base


def _waiting_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002 - __import__'s names
    package = (globals or {}).get("__package__") if level else None
    _wait_for_imports(_absolute(name, package, level), tuple(fromlist or ()))
    return _builtin_import(name, globals, locals, fromlist, level)


def _waiting_import_module(name: str, package: str | None = None):
    level = len(name) - len(name.lstrip("."))
    _wait_for_imports(_absolute(name[level:], package, level))
    return _import_module(name, package)


def _stop_waiting() -> None:
    # Put back only what is still ours; a wrapper someone installed after
    # ours keeps calling ours, which no longer waits once the thread is done.
    if builtins.__import__ is _waiting_import:
        builtins.__import__ = _builtin_import
    if importlib.import_module is _waiting_import_module:
        importlib.import_module = _import_module


def _run() -> None:
    try:
        for name in MODULES:
            if name not in sys.modules:
                _import_module(name)
    except Exception:  # noqa: BLE001 - the first meta kernel would import it anyway
        pass
    finally:
        _stop_waiting()
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
    builtins.__import__ = _waiting_import  # Note [Imports beside the warm-up]
    importlib.import_module = _waiting_import_module
    _thread.start()
    os.register_at_fork(before=_before_fork)
