"""Shared helpers for core's tests.

The tests run against the embedded simulator (the default where CANN is not
installed); ./dev test turns its memory checker on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh Python process; returns the completed process."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def python_subprocess():
    return run_python


@pytest.fixture
def activity_recording():
    """Device activity recording on for the test, with nothing recorded before
    it and nothing left behind (torch_npu._C._activity_*)."""
    import torch
    import torch_npu

    C = torch_npu._C
    torch.npu.synchronize()
    C._activity_flush()
    C._activity_enable(True)
    try:
        yield
    finally:
        torch.npu.synchronize()
        C._activity_enable(False)
        C._activity_flush()
