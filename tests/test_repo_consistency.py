"""The packages, the scripts and the docs agree with each other."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import tomllib
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


def _torch_versions() -> list[str]:
    lines = (ROOT / "version.txt").read_text().splitlines()
    return [l.strip() for l in lines if l.strip() and not l.lstrip().startswith("#")]


def test_version_txt():
    versions = _torch_versions()
    assert versions, "version.txt lists no torch version"
    for v in versions:
        assert re.fullmatch(r"\d+\.\d+\.\d+", v), v
    assert len(set(versions)) == len(versions)


def test_compatibility_doc_lists_every_torch_version():
    doc = (ROOT / "COMPATIBILITY.en.md").read_text()
    for v in _torch_versions():
        assert v in doc


def test_pinned_torch_is_supported():
    """./dev and core's build pin a torch that version.txt lists."""
    dev = (ROOT / "dev").read_text()
    pins = re.findall(r'"torch==([^"]+)"', dev)
    assert pins, "./dev does not pin torch"
    core = _pyproject("core")
    pins += [
        r.split("==", 1)[1]
        for r in core["build-system"]["requires"] + core["project"]["dependencies"]
        if re.match(r"torch\s*==", r)
    ]
    for pin in pins:
        assert pin.strip() in _torch_versions(), pin


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
