"""The tests every plugin package of torch-npu passes: it installs as a plugin
of torch-npu-core, loads through its entry point, and core names it when it
is missing.

Shared by the plugin packages (pytest.ini puts this folder on sys.path): a
package's tests/test_<name>_plugin.py subclasses :class:`PluginContract`
and says where the package is; the plugin's distribution and name are read
from its pyproject.toml, so the file holds nothing to keep in step::

    from pathlib import Path

    from plugin_contract import PluginContract

    class TestPlugin(PluginContract):
        package_dir = Path(__file__).resolve().parents[1]
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (matrix rows): the same parser, from PyPI
    import tomli as tomllib

import pytest

ENTRY_POINT_GROUP = "torch_npu.plugins"


@dataclass(frozen=True)
class Plugin:
    """A plugin package as its pyproject.toml declares it."""

    distribution: str  # e.g. "torch-npu-graph"
    name: str  # its torch_npu.plugins entry point, the submodule torch_npu.<name>


def read_plugin(package_dir: Path) -> Plugin:
    """The plugin declared by ``package_dir/pyproject.toml``."""
    with open(package_dir / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    names = list(project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {}))
    assert len(names) == 1, f"{package_dir.name}: one {ENTRY_POINT_GROUP} entry point, found {names}"
    return Plugin(project["name"], names[0])


class PluginContract:
    """The plugin tests; a subclass sets ``package_dir``, the package's folder."""

    package_dir: Path

    @pytest.fixture
    def plugin(self) -> Plugin:
        if self.package_dir.name.startswith("_"):
            pytest.skip("packages/_template is the skeleton of a package, not one")
        return read_plugin(self.package_dir)

    def test_loaded_through_the_entry_point(self, plugin: Plugin) -> None:
        from torch_npu import _plugins

        info = _plugins.loaded_plugins()[plugin.name]
        assert info.status == "loaded", info.error
        assert info.distribution == plugin.distribution

    def test_import_forms_give_one_module(self, plugin: Plugin) -> None:
        import torch_npu

        imported = importlib.import_module(f"torch_npu.{plugin.name}")
        assert getattr(torch_npu, plugin.name) is imported
        assert imported.__version__ == importlib.metadata.version(plugin.distribution)

    def test_core_says_what_to_install_without_it(self, plugin: Plugin) -> None:
        # core's generated package list knows the plugin: a missing install
        # says `pip install <distribution>` or the meta-package's extra.
        from torch_npu import _plugins

        assert _plugins.KNOWN_PLUGINS[plugin.name] == plugin.distribution
        assert _plugins.DISTRIBUTION_EXTRAS[plugin.distribution] == plugin.name
