"""Tests of ``python -m torch_npu.utils.collect_env``.

The subprocess tests need torch_npu installed with its extension built
(``./dev test`` does that); the rendering tests load collect_env.py by path.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1]
COLLECT_ENV_PY = CORE / "torch_npu" / "utils" / "collect_env.py"


def _core_version() -> str:
    # The installed distribution's (tomllib, for pyproject.toml, needs 3.11).
    return importlib.metadata.version("torch-npu-core")


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["NPU_SIM_DEVICE_COUNT"] = "2"
    env.pop("TORCH_NPU_DISABLE_PLUGINS", None)
    env.pop("ASCEND_RT_VISIBLE_DEVICES", None)
    env["TORCH_NPU_BACKEND"] = "simulator"
    proc = subprocess.run(
        [sys.executable, "-m", "torch_npu.utils.collect_env", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not the source tree: import the installed torch_npu
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_collect_env_report(tmp_path):
    out = _run(tmp_path=tmp_path).stdout
    lines = out.splitlines()
    assert lines[0] == "Collecting environment information..."
    assert any(l.startswith("Python: 3.") for l in lines), out
    assert any(l.startswith("OS: ") for l in lines), out
    assert any(l.startswith("torch: 2.") for l in lines), out
    assert f"  torch-npu-core: {_core_version()}" in lines, out
    assert any(l.startswith("  torch-npu-profiler: ") for l in lines), out
    assert "Plugins:" in lines, out
    assert "Backend:" in lines, out
    assert "  backend: simulator" in lines, out
    assert any(l.startswith("  library: ") and "npu_sim" in l for l in lines), out
    assert any(l.startswith("  CANN version: ") for l in lines), out
    assert "Devices:" in lines, out
    assert "  available: True" in lines, out
    assert "  device count: 2" in lines, out
    for i in range(2):
        assert any(
            l.startswith(f"  npu:{i}: ") and "total memory " in l and "bytes" in l
            for l in lines
        ), out
    assert "  NPU_SIM_DEVICE_COUNT=2" in lines, out
    assert "unavailable" not in out, out


def test_collect_env_json(tmp_path):
    info = json.loads(_run("--json", tmp_path=tmp_path).stdout)
    assert info["torch_npu"] == _core_version()
    assert info["distributions"]["torch-npu-core"] == _core_version()
    assert info["backend"]["backend"] == "simulator"
    assert isinstance(info["plugins"], dict)
    assert info["build"]["built_with_torch"].split("+")[0] == info["torch"].split("+")[0]
    assert info["devices"]["count"] == 2
    # the matrix row of this environment: the emulated CANN is part of it
    cann = info["backend"]["cann_version"]
    py = ".".join(sys.version.split()[0].split(".")[:2])
    assert info["compatibility"]["row"] == f"torch {info['torch'].split('+')[0]}, CANN {cann}, Python {py}"
    assert info["compatibility"]["status"] in ("tested", "stale", "untested")
    assert [d["index"] for d in info["devices"]["devices"]] == [0, 1]
    for dev in info["devices"]["devices"]:
        assert isinstance(dev["name"], str) and dev["name"]
        assert isinstance(dev["total_memory"], int) and dev["total_memory"] > 0


# ---------------------------------------------------------------------------
# Rendering and robustness, without the extension
# ---------------------------------------------------------------------------


@pytest.fixture
def collect_env():
    name = f"_collect_env_under_test_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, COLLECT_ENV_PY)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[name]


def test_pretty_str_full(collect_env):
    info = {
        "python": "3.11.7 (/x/python)",
        "os": "Linux",
        "machine": "x86_64",
        "environment": {"NPU_SIM_CHECKER": "1"},
        "distributions": {"torch-npu-core": "0.1.0", "torch-npu-ops": "not installed"},
        "torch": "2.13.0+cpu",
        "torch_npu": "0.1.0",
        "build": {
            "version": "0.1.0",
            "built_with_torch": "2.13.0",
            "supported_torch_versions": ["2.13.0", "2.14.1"],
            "cann_headers_version": "9.0.0",
        },
        "plugins": {
            "ops": {"distribution": "torch-npu-ops", "version": "0.1.0", "status": "loaded", "error": None},
            "graph": {"distribution": "torch-npu-graph", "version": "0.2", "status": "failed", "error": "OSError: x"},
        },
        "backend": {"backend": "simulator", "library": "/l/libnpu_sim.so", "cann_version": "9.0.0", "description": "d"},
        "compatibility": {"row": "torch 2.13.0, CANN 9.0.0, Python 3.11", "status": "tested",
                          "detail": "2026-12-02: nox -s tests"},
        "devices": {
            "available": True,
            "count": 1,
            "devices": [{"index": 0, "name": "Ascend910B", "total_memory": 2**30}],
        },
    }
    text = collect_env.pretty_str(info)
    lines = text.splitlines()
    assert "torch: 2.13.0+cpu" in lines
    assert "  torch-npu-ops: not installed" in lines
    assert "  supported torch: 2.13.0, 2.14.1" in lines
    assert "  ops: torch-npu-ops 0.1.0 [loaded]" in lines
    assert "  graph: torch-npu-graph 0.2 [failed] OSError: x" in lines
    assert "  backend: simulator" in lines
    assert "  matrix row: torch 2.13.0, CANN 9.0.0, Python 3.11" in lines
    assert "  status: tested (2026-12-02: nox -s tests)" in lines
    assert "  npu:0: Ascend910B, total memory 1073741824 bytes (1.00 GiB)" in lines
    assert "  NPU_SIM_CHECKER=1" in lines
    json.dumps(info)  # the dict form stays serialisable


def test_pretty_str_with_missing_pieces(collect_env):
    text = collect_env.pretty_str(
        {
            "torch": "2.13.0",
            "backend": "unavailable: AttributeError: no _backend_info",
            "devices": {"available": True, "count": 1, "devices": [
                {"index": 0, "name": "unavailable: RuntimeError: boom", "total_memory": "unavailable: x"}]},
        }
    )
    assert "Backend: unavailable: AttributeError: no _backend_info" in text
    assert "Python: unavailable: not collected" in text
    assert "  npu:0: unavailable: RuntimeError: boom, total memory unavailable: x" in text


def test_get_env_info_survives_failed_import(collect_env, monkeypatch):
    real_import = collect_env._import

    def fake_import(name):
        if name.startswith("torch_npu"):
            raise RuntimeError("extension not built\nsecond line")
        return real_import(name)

    monkeypatch.setattr(collect_env, "_import", fake_import)
    info = collect_env.get_env_info()
    assert info["torch_npu"] == "unavailable: RuntimeError: extension not built"
    for key in ("build", "plugins", "backend", "compatibility", "devices"):
        assert collect_env.is_unavailable(info[key]), key
    assert "torch-npu-core" in info["distributions"]
    text = collect_env.pretty_str(info)
    assert "Devices: unavailable: " in text
    json.dumps(info)


def test_devices_survive_failing_calls(collect_env):
    class FakeNpu:
        @staticmethod
        def is_available():
            return True

        @staticmethod
        def device_count():
            return 2

        @staticmethod
        def get_device_name(i):
            if i == 1:
                raise RuntimeError("device 1 lost")
            return "Sim"

        @staticmethod
        def get_device_properties(i):
            return type("P", (), {"total_memory": 1024})()

    class FakeTorch:
        npu = FakeNpu

    devices = collect_env._devices(FakeTorch)
    assert devices["count"] == 2
    assert devices["devices"][0] == {"index": 0, "name": "Sim", "total_memory": 1024}
    assert devices["devices"][1]["name"] == "unavailable: RuntimeError: device 1 lost"


def test_main_json_and_help(collect_env, capsys, monkeypatch):
    monkeypatch.setattr(collect_env, "get_env_info", lambda: {"torch": "2.13.0"})
    assert collect_env.main(["--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"torch": "2.13.0"}
    assert collect_env.main(["--help"]) == 0
    assert "collect_env" in capsys.readouterr().out
