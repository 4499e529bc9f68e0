"""torch_npu.profiler: profiling of npu work (the torch-npu-profiler plugin).

This release is the package skeleton of the monorepo: it installs, loads as a
plugin and pins the torch-npu-core versions it works with. The profiler API
(``profile``, ``schedule``, ``tensorboard_trace_handler``, ...), dynamic profiling
and mstx come with the profiler issue (see README.md). Memory snapshots render
as pictures with ``python -m torch_npu.profiler.memory_viz`` (the ``viz`` extra).

Loaded by torch_npu at import through the ``torch_npu.plugins`` entry point.
"""

from __future__ import annotations

from types import ModuleType

__version__ = "0.1.0"

__all__ = ["__version__"]


def _initialize_plugin(torch_npu: ModuleType) -> None:
    """Entry point of the ``torch_npu.plugins`` group. Nothing to attach yet: the
    npu activity of torch.profiler registers here once it exists."""
