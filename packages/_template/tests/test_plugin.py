"""torch-npu-example installs as a plugin of torch-npu-core and loads with it.

In a new package, rename this file to tests/test_<name>_plugin.py; the
tests themselves are the shared ones of every plugin (plugin_contract.py).
"""

from __future__ import annotations

from pathlib import Path

from plugin_contract import PluginContract


class TestPlugin(PluginContract):
    package_dir = Path(__file__).resolve().parents[1]
