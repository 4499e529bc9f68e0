"""Running scripts against the simulator library in fresh processes.

A module of its own, not conftest.py: test modules import these by name, and
``from conftest import ...`` gets whichever conftest.py pytest imported last
under that name (another package's, when a run names test files of several
packages, as a CANN row of CI does).
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent

# Configuration the simulator reads; tests set it explicitly. So a child runs
# the default CANN release, whatever row runs the tests, unless its test sets
# the release itself (and then names the variable in its own source).
SIM_ENV_VARS = (
    "NPU_SIM_DEVICE_COUNT",
    "NPU_SIM_DEVICE_MEMORY",
    "NPU_SIM_CHECKER",
    "NPU_SIM_RACE_CHECK",
    "NPU_SIM_CANN_VERSION",  # cann-reach: not a question
    "NPU_SIM_SOC_NAME",
    "ASCEND_RT_VISIBLE_DEVICES",
    "NPU_SIM_HOST_ID",
    "NPU_SIM_HCCL_TRANSPORT",
    "NPU_SIM_DEVICE_HEAP",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "ATEN_CPU_CAPABILITY",
)


class Runner:
    """Runs a script against the library in a fresh Python process."""

    PRELUDE = textwrap.dedent(
        """\
        import ctypes, os, sys, time
        sys.path.insert(0, {tests!r})
        from _simlib import *
        sim = load_sim()
        lib = sim.lib
        """
    )

    def __init__(self, lib_path):
        self.lib_path = lib_path

    def env(self, **overrides):
        env = {k: v for k, v in os.environ.items() if k not in SIM_ENV_VARS}
        env["NPU_SIM_LIBRARY"] = str(self.lib_path)
        env.pop("PYTHONFAULTHANDLER", None)
        env.update({k: str(v) for k, v in overrides.items()})
        return env

    def run(self, body, timeout=60, **env):
        code = self.PRELUDE.format(tests=str(TESTS_DIR)) + textwrap.dedent(body)
        return subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env(**env),
        )

    def ok(self, body, **env):
        result = self.run(body, **env)
        assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        return result
