"""torch-npu-profiler installs as a plugin of torch-npu-core and loads with it."""

from __future__ import annotations

import importlib.metadata

import torch_npu
from torch_npu import _plugins


def test_loaded_through_the_entry_point():
    info = _plugins.loaded_plugins()["profiler"]
    assert info.status == "loaded", info.error
    assert info.distribution == "torch-npu-profiler"


def test_import_forms_give_one_module():
    import torch_npu.profiler as imported
    from torch_npu.profiler import __version__

    assert torch_npu.profiler is imported
    assert __version__ == importlib.metadata.version("torch-npu-profiler")
