"""The packages, the scripts and the docs agree with each other."""

from __future__ import annotations

import importlib.util
import os
import sys
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (matrix rows): the same parser, from PyPI
    import tomli as tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def plugins():
    yield _load(ROOT / "packages/core/torch_npu/_plugins.py", "_plugins_consistency")
    del sys.modules["_plugins_consistency"]


def _pyproject(package: str) -> dict:
    with open(ROOT / "packages" / package / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_tree_agrees_with_the_compatibility_matrix():
    """version.txt, COMPATIBILITY.en.md, package versions and pins, the
    tables core ships: everything compat/ describes (tests/test_compat.py
    tests the check itself)."""
    sys.path.insert(0, str(ROOT))
    try:
        from compat.check import run_checks
        from compat.matrix import load
    finally:
        sys.path.remove(str(ROOT))
    assert run_checks(load()) == []


def test_meta_package_extras_match_known_plugins(plugins):
    meta = _pyproject("torch-npu")
    assert meta["project"]["name"] == "torch-npu"
    core = _pyproject("core")
    assert core["project"]["name"] == plugins.CORE_DISTRIBUTION
    major_minor = ".".join(core["project"]["version"].split(".")[:2])
    assert meta["project"]["dependencies"] == [f"{plugins.CORE_DISTRIBUTION}=={major_minor}.*"]

    extras = meta["project"]["optional-dependencies"]
    expected = {extra: [dist] for dist, extra in plugins.DISTRIBUTION_EXTRAS.items()}
    assert {k: v for k, v in extras.items() if k != "all"} == expected
    assert extras["all"] == [f"torch-npu[{','.join(expected)}]"]
    assert set(plugins.KNOWN_PLUGINS.values()) == set(plugins.DISTRIBUTION_EXTRAS)


def test_every_plugin_has_a_package_folder(plugins):
    for dist, extra in plugins.DISTRIBUTION_EXTRAS.items():
        readme = ROOT / "packages" / extra / "README.md"
        assert readme.is_file(), readme
        assert dist in readme.read_text()


def test_scripts_are_executable():
    for script in ("dev", ".ci/run"):
        assert os.access(ROOT / script, os.X_OK), script
