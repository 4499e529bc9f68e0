"""Tests of torch_npu._version_check (pure functions; no extension needed)."""

from __future__ import annotations

import importlib.util
import sys
import uuid
import warnings
from pathlib import Path

import pytest

VERSION_CHECK_PY = Path(__file__).resolve().parents[1] / "torch_npu" / "_version_check.py"
SUPPORTED = ("2.13.0", "2.14.1")
ENV = "TORCH_NPU_SKIP_TORCH_VERSION_CHECK"


@pytest.fixture
def vc(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    name = f"_version_check_under_test_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, VERSION_CHECK_PY)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[name]


def _no_warning(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


@pytest.mark.parametrize(
    "installed, built_with",
    [
        ("2.13.0", "2.13.0"),
        ("2.13.0+cpu", "2.13.0"),
        ("2.13.0+cu130", "2.13.0+cpu"),
        ("2.13", "2.13.0"),
        ("2.14.1", "2.14.1"),
        ("2.14.1+cpu", "2.14.0"),  # listed, and same major.minor as the build
    ],
)
def test_supported_versions_pass(vc, installed, built_with):
    assert _no_warning(vc.check_torch_version, installed, SUPPORTED, built_with) is None


@pytest.mark.parametrize(
    "installed, built_with",
    [
        ("2.12.0", "2.13.0"),  # not listed
        ("2.13.1", "2.13.0"),  # same minor, but not listed
        ("2.15.0+cpu", "2.13.0"),  # newer, not listed
        ("2.14.0a0+gitabc", "2.14.1"),  # a nightly of a listed minor
        ("2.14.1", "2.13.0"),  # listed, but other ABI than the build
        ("2.13.0", "2.14.1+cpu"),  # listed, but other ABI than the build
    ],
)
def test_unsupported_versions_raise(vc, installed, built_with):
    with pytest.raises(ImportError):
        vc.check_torch_version(installed, SUPPORTED, built_with)


def test_error_message(vc):
    with pytest.raises(ImportError) as info:
        vc.check_torch_version(
            "2.15.0+cpu", SUPPORTED, "2.13.0+cpu", torch_npu_version="0.1.0"
        )
    assert str(info.value) == (
        "torch_npu 0.1.0 was built for torch 2.13.0 (this tree supports: 2.13.0, "
        "2.14.1) but torch 2.15.0+cpu is installed. Install a supported torch, "
        "e.g. `pip install torch==2.13.0`, or a torch_npu built for torch "
        "2.15.0; see COMPATIBILITY.en.md. Set "
        "TORCH_NPU_SKIP_TORCH_VERSION_CHECK=1 to import anyway (unsupported)."
    )


def test_error_message_without_torch_npu_version(vc):
    with pytest.raises(ImportError, match=r"^torch_npu was built for torch 2\.13\.0 "):
        vc.check_torch_version("2.12.0", ["2.13.0"], "2.13.0")


def test_abi_mismatch_message_names_build(vc):
    with pytest.raises(ImportError) as info:
        vc.check_torch_version("2.14.1", SUPPORTED, "2.13.0", torch_npu_version="0.1.0")
    msg = str(info.value)
    assert "built for torch 2.13.0" in msg
    assert "but torch 2.14.1 is installed" in msg
    assert "`pip install torch==2.13.0`" in msg


def test_supported_list_is_cleaned(vc):
    # as read from version.txt: whitespace and blank entries are tolerated
    _no_warning(vc.check_torch_version, "2.13.0", [" 2.13.0\n", "", "2.14.1"], "2.13.0")
    with pytest.raises(ImportError, match=r"this tree supports: none\)"):
        vc.check_torch_version("2.13.0", [], "2.13.0")


def test_unparseable_versions_raise(vc):
    with pytest.raises(ImportError):
        vc.check_torch_version("unknown", SUPPORTED, "2.13.0")
    with pytest.raises(ImportError):
        vc.check_torch_version("2.13.0", SUPPORTED, "")


@pytest.mark.parametrize("value", ["1", "true", "YES"])
def test_env_override_warns_instead(vc, monkeypatch, value):
    monkeypatch.setenv(ENV, value)
    with pytest.warns(RuntimeWarning) as caught:
        result = vc.check_torch_version(
            "2.15.0", SUPPORTED, "2.13.0", torch_npu_version="0.1.0"
        )
    assert result is None
    assert len(caught) == 1
    msg = str(caught[0].message)
    assert "torch_npu 0.1.0 was built for torch 2.13.0" in msg
    assert "(this tree supports: 2.13.0, 2.14.1)" in msg
    assert "but torch 2.15.0 is installed" in msg
    assert ENV in msg and "unsupported" in msg


@pytest.mark.parametrize("value", ["0", "", "no"])
def test_env_override_other_values_still_raise(vc, monkeypatch, value):
    monkeypatch.setenv(ENV, value)
    with pytest.raises(ImportError):
        vc.check_torch_version("2.15.0", SUPPORTED, "2.13.0")


def test_env_override_silent_when_supported(vc, monkeypatch):
    monkeypatch.setenv(ENV, "1")
    _no_warning(vc.check_torch_version, "2.13.0", SUPPORTED, "2.13.0")


def test_helpers(vc):
    assert vc.strip_local("2.13.0+cpu") == "2.13.0"
    assert vc.strip_local(" 2.13.0 ") == "2.13.0"
    assert vc.same_version("2.13", "2.13.0+cpu")
    assert not vc.same_version("2.13.0", "2.13.0rc1")
    assert not vc.same_version("2.13.0", "2.13.1")


def test_installed_torch_is_supported_by_this_tree(vc):
    """The torch in this environment is one version.txt lists (./dev pins it)."""
    torch = pytest.importorskip("torch")
    version_txt = Path(__file__).resolve().parents[3] / "version.txt"
    supported = [
        line.strip()
        for line in version_txt.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    _no_warning(vc.check_torch_version, torch.__version__, supported, torch.__version__)
