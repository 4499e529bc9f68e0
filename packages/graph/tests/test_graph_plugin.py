"""torch-npu-graph installs as a plugin of torch-npu-core and loads with it."""

from __future__ import annotations

import importlib.metadata

import torch_npu
from torch_npu import _plugins


def test_loaded_through_the_entry_point():
    info = _plugins.loaded_plugins()["graph"]
    assert info.status == "loaded", info.error
    assert info.distribution == "torch-npu-graph"


def test_import_forms_give_one_module():
    import torch_npu.graph as imported
    from torch_npu.graph import __version__

    assert torch_npu.graph is imported
    assert __version__ == importlib.metadata.version("torch-npu-graph")
