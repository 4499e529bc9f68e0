"""CANN feature gates on the torch_npu side: versions, messages, warnings.

The table is generated from compat/cann_features.toml into
torch_npu/_compat_data.py; the simulator gates the same table
(tests/simulator/test_sim_vmm.py checks its side).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from torch_npu import _cann_features
from torch_npu._cann_version import CannVersion


@pytest.mark.parametrize("lower, higher", [
    ("8.0.RC1", "8.0.RC2"), ("8.0.RC3", "8.0.0"), ("8.0.0", "8.0.1"), ("8.0.1", "8.1.RC1"),
    ("8.5.0", "9.0.0"), ("8.0.0", "8.0.0.1"), ("9.0.0", "10.0.RC1"),
])
def test_cann_versions_order_like_releases(lower, higher):
    assert CannVersion(lower) < CannVersion(higher)
    assert CannVersion(higher) > lower
    assert CannVersion("8.1.rc1") == "8.1.RC1"


def test_malformed_cann_version_is_rejected():
    with pytest.raises(ValueError, match="is not a CANN version"):
        CannVersion("9")


def test_feature_availability_follows_the_table():
    since = CannVersion(_cann_features.FEATURES["model_capture"][0])
    assert str(since) == "8.1.RC1"
    assert _cann_features.feature_available("model_capture", "8.1.RC1") is True
    assert _cann_features.feature_available("model_capture", "8.0.0") is False
    # CANN that does not report its version predates the version query (8.1.RC1)
    assert _cann_features.feature_available("model_capture", "unknown") is False
    assert _cann_features.feature_available("virtual_memory", "unknown") is None
    with pytest.raises(ValueError, match="unknown CANN feature 'warp_drive'"):
        _cann_features.feature_available("warp_drive", "9.0.0")


def test_missing_feature_messages_say_what_to_install():
    sim = _cann_features.missing_feature_message("model_capture", "8.0.0", "simulator")
    assert "torch.npu.NPUGraph" in sim and "since 8.1.RC1" in sim
    assert "simulated CANN is 8.0.0" in sim and "NPU_SIM_CANN_VERSION=8.1.RC1" in sim
    real = _cann_features.missing_feature_message(
        "pinned_memory_expandable_segments", "8.1.RC1", "cann", purpose="pin_memory_expandable_segments:True")
    assert real.startswith("pin_memory_expandable_segments:True needs")
    assert "install CANN 8.5.0 or newer" in real and "set_env.sh" in real
    old = _cann_features.missing_feature_message("model_capture", "unknown", "cann")
    assert "older than 8.1.RC1 (it does not report its version)" in old
    assert _cann_features.missing_feature_message("model_capture", "9.0.0", "cann") is None


def test_unsupported_cann_warning_text():
    text = _cann_features.unsupported_cann_message("7.0.0", "simulator")
    assert "CANN 7.0.0 (NPU_SIM_CANN_VERSION) is older than the oldest release" in text
    assert "(8.0.0)" in text
    assert _cann_features.unsupported_cann_message("8.0.0", "cann") is None


def _run(code: str, cann: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NPU_SIM_CANN_VERSION": cann, "PYTHONWARNINGS": "always"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)


def test_torch_npu_reports_and_gates_the_emulated_release():
    code = """
        import torch, torch_npu
        print(torch.npu.get_cann_version(), torch_npu.utils.get_cann_version("HCCL") == "")
        print(torch.npu.is_cann_feature_available("model_capture"),
              torch.npu.is_cann_feature_available("virtual_memory"))
        try:
            torch.npu.require_cann_feature("model_capture")
        except RuntimeError as exc:
            print("error:", exc)
        else:
            print("ok")
    """
    old = _run(code, "8.0.0")
    assert old.returncode == 0, old.stderr
    lines = old.stdout.splitlines()
    assert lines[0] == "8.0.0 True"
    assert lines[1] == "False True"
    assert lines[2].startswith("error: torch.npu.NPUGraph (torch-npu-graph) needs capturing")
    assert "NPU_SIM_CANN_VERSION=8.1.RC1" in lines[2]
    new = _run(code, "9.0.0")
    assert new.returncode == 0, new.stderr
    assert new.stdout.splitlines()[1:] == ["True True", "ok"]


def test_device_init_warns_on_a_cann_older_than_the_matrix():
    result = _run("import torch, torch_npu; torch.npu.init(); print('initialised')", "7.0.0")
    assert result.returncode == 0, result.stderr
    assert "initialised" in result.stdout
    assert "CANN 7.0.0 (NPU_SIM_CANN_VERSION) is older than the oldest release" in result.stderr
    quiet = _run("import torch, torch_npu; torch.npu.init()", "8.0.0")
    assert "older than the oldest" not in quiet.stderr
