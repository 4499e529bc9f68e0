"""torch_npu.graph: NPUGraph capture/replay for npu (the torch-npu-graph plugin).

Installs on ``torch.npu``, as Ascend's torch_npu has them:
``torch.npu.NPUGraph``, ``torch.npu.graph``, ``torch.npu.make_graphed_callables``,
``torch.npu.graph_pool_handle`` and ``torch.npu.is_current_stream_capturing``
(see :mod:`torch_npu.graph.graphs`), and makes ``torch.accelerator.Graph``
capture npu work. Graphs are built on CANN's model capture (CANN 8.1.RC1 or
later; the embedded simulator emulates it).

Loaded by torch_npu at import through the ``torch_npu.plugins`` entry point.
"""

from __future__ import annotations

from types import ModuleType

from torch_npu._plugins import check_plugin_build

from . import _build_info

__version__ = "0.1.0"

# Before the extension loads: built for another core or torch, it would fail
# with undefined symbols, or misbehave.
check_plugin_build("torch-npu-graph", __version__, _build_info.BUILT_WITH_CORE,
                   _build_info.BUILT_WITH_TORCH)

from . import graphs  # noqa: E402
from .graphs import (  # noqa: E402
    NPUGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
)

__all__ = [
    "NPUGraph",
    "__version__",
    "graph",
    "graph_pool_handle",
    "graphs",
    "is_current_stream_capturing",
    "make_graphed_callables",
]


def _initialize_plugin(torch_npu: ModuleType) -> None:
    """Entry point of the ``torch_npu.plugins`` group: attaches the graph API
    to ``torch.npu`` (importing this module registered NPUGraph with
    ``torch.accelerator.Graph``)."""
    npu = torch_npu.npu
    from .compile._hook import install as install_compile  # torch.compile for npu (when Dynamo loads)
    install_compile()
    npu.graphs = graphs
    for name in graphs.__all__:
        setattr(npu, name, getattr(graphs, name))
