"""torch-npu-distributed installs as a plugin of torch-npu-core and loads with it."""

from __future__ import annotations

import importlib.metadata

import torch_npu
from torch_npu import _plugins


def test_loaded_through_the_entry_point():
    info = _plugins.loaded_plugins()["distributed"]
    assert info.status == "loaded", info.error
    assert info.distribution == "torch-npu-distributed"


def test_import_forms_give_one_module():
    import torch_npu.distributed as imported
    from torch_npu.distributed import __version__

    assert torch_npu.distributed is imported
    assert __version__ == importlib.metadata.version("torch-npu-distributed")
