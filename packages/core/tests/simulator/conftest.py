"""Fixtures for the NPU simulator tests.

The library under test is, in order: $NPU_SIM_LIBRARY; torch_npu/lib/
libnpu_sim.so of an installed torch_npu (located without importing it);
otherwise it is built from packages/core/csrc/simulator with CMake, once
per session.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
SOURCE_DIR = TESTS_DIR.parents[1] / "csrc" / "simulator"
sys.path.insert(0, str(TESTS_DIR))

import _simlib  # noqa: E402
from _simrunner import SIM_ENV_VARS, Runner  # noqa: E402,F401

def _installed_library():
    spec = importlib.util.find_spec("torch_npu")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "lib" / "libnpu_sim.so"
        if candidate.is_file():
            return candidate
    return None


def _build_library(build_dir):
    configure = ["cmake", "-S", str(SOURCE_DIR), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    for cmd in (configure, ["cmake", "--build", str(build_dir), "-j2"]):
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            pytest.fail(f"building the simulator failed: {' '.join(cmd)}\n{result.stdout}\n{result.stderr}")
    return build_dir / "libnpu_sim.so"


@pytest.fixture(scope="session")
def lib_path(tmp_path_factory):
    env = os.environ.get("NPU_SIM_LIBRARY")
    if env:
        path = Path(env)
        if not path.is_file():
            pytest.fail(f"NPU_SIM_LIBRARY={env} does not exist")
        return path
    path = _installed_library()
    if path is not None:
        return path
    return _build_library(tmp_path_factory.mktemp("npu_sim_build"))


@pytest.fixture(scope="session")
def sim(lib_path, tmp_path_factory):
    """A private copy of the library loaded into the test process, with the
    default configuration.

    A copy, so that its state is independent of the simulator torch_npu
    loaded into this process (other tests use that one, with the
    configuration of the environment, e.g. NPU_SIM_CHECKER=1). The variables
    are hidden only while the copy reads its configuration, at its first call.
    """
    private = tmp_path_factory.mktemp("npu_sim_private") / "libnpu_sim_private.so"
    shutil.copy2(lib_path, private)
    saved = {name: os.environ.pop(name) for name in SIM_ENV_VARS if name in os.environ}
    try:
        s = _simlib.Sim(_simlib.load(str(private)))
        s.device_count()
        s.set_device(0)
    finally:
        os.environ.update(saved)
    return s


@pytest.fixture
def dev0(sim):
    """Makes device 0 current on the calling thread."""
    sim.set_device(0)
    return sim


@pytest.fixture(scope="session")
def runner(lib_path):
    return Runner(lib_path)
