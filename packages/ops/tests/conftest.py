"""Tests of torch-npu-ops: every op compared against the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_npu  # noqa: F401


@pytest.fixture(autouse=True)
def drained_device():
    yield
    torch.npu.synchronize()


@pytest.fixture
def python_subprocess_env():
    """Runs Python code in a fresh process with extra environment variables."""

    def run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )

    return run
