"""torch_npu.graph: NPUGraph capture/replay and torch.compile for npu (the torch-npu-graph plugin).

This release is the package skeleton of the monorepo: it installs, loads as a
plugin and pins the torch-npu-core versions it works with. ``torch.npu.NPUGraph``
(on CANN's model-capture API, which needs CANN 8.1.RC1 or newer) and the
Inductor backend for npu come with the graph issue (see README.md).

Loaded by torch_npu at import through the ``torch_npu.plugins`` entry point.
"""

from __future__ import annotations

from types import ModuleType

__version__ = "0.1.0"

__all__ = ["__version__"]


def _initialize_plugin(torch_npu: ModuleType) -> None:
    """Entry point of the ``torch_npu.plugins`` group. Nothing to attach yet:
    torch.npu.NPUGraph and the Inductor backend register here once they exist."""
