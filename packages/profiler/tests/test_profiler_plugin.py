"""torch-npu-profiler installs as a plugin of torch-npu-core and loads with it
(the tests every plugin passes: packages/_template/tests/plugin_contract.py)."""

from __future__ import annotations

from pathlib import Path

from plugin_contract import PluginContract


class TestPlugin(PluginContract):
    package_dir = Path(__file__).resolve().parents[1]
