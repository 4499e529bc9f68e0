"""torch_npu.ops: ATen kernels for npu (the torch-npu-ops plugin).

Loaded by torch_npu at import through the ``torch_npu.plugins`` entry point.
From then on every ATen op runs on npu tensors as device work; see
:func:`execution_counters` for how many ran asynchronously.
"""

from __future__ import annotations

from types import ModuleType

from . import _C

__version__ = "0.1.0"

_C._install()


def execution_counters() -> dict[str, int]:
    """How many ops ran on each path: ``device_async`` (queued, the host did
    not wait) and ``device_sync`` (data-dependent results: the host waited)."""
    return dict(_C._execution_counters())


def synchronous_ops() -> dict[str, int]:
    """Op name -> how often it ran on the synchronous path."""
    return dict(_C._sync_ops())


def reset_execution_counters() -> None:
    """Sets the counters of :func:`execution_counters` back to zero."""
    _C._reset_execution_counters()


def _initialize_plugin(torch_npu: ModuleType) -> None:
    """Entry point of the ``torch_npu.plugins`` group: importing this module
    installed the kernels already."""


__all__ = ["execution_counters", "reset_execution_counters", "synchronous_ops"]
