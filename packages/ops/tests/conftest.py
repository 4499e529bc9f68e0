"""Tests of torch-npu-ops: every op compared against the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

# These tests check the asynchronous paths from each process's first op on:
# no background warm-up that runs the first ops synchronously (Note [Python
# meta kernels and the first op]; test_meta_warmup.py tests it). Set before
# torch_npu loads, and inherited by the processes the tests start.
os.environ.setdefault("TORCH_NPU_META_WARMUP", "0")

import torch  # noqa: E402

import torch_npu  # noqa: E402,F401


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


# OpInfo conformance (test_opinfo_conformance.py): one line with the share of
# OpInfo entries that pass, and the per-dtype totals. An entry passes when its
# test passed; a known failure (xfail) counts as failing.
OPINFO_TEST = "test_opinfo_conformance.py::test_opinfo["


def pytest_terminal_summary(terminalreporter):
    entries: dict[str, bool] = {}
    dtypes: dict[str, list[int]] = {}  # dtype -> [passed, tested]
    for category in ("passed", "failed", "xfailed", "xpassed", "error"):
        for report in terminalreporter.stats.get(category, []):
            nodeid = getattr(report, "nodeid", "")
            if OPINFO_TEST not in nodeid:
                continue
            ok = category == "passed" and report.when == "call"
            entries[nodeid] = entries.get(nodeid, True) and ok
            if report.when != "call":
                continue
            for name, value in report.user_properties:
                if name == "opinfo_dtypes":
                    for dtype, passed in value.items():
                        totals = dtypes.setdefault(dtype, [0, 0])
                        totals[0] += int(passed)
                        totals[1] += 1
    if not entries:
        return
    passed = sum(entries.values())
    total = len(entries)
    terminalreporter.write_sep("-", "OpInfo conformance")
    terminalreporter.write_line(
        f"OpInfo conformance: {passed}/{total} entries pass ({100.0 * passed / total:.1f}%)")
    terminalreporter.write_line(
        "per dtype (entries passing/tested): "
        + ", ".join(f"{d} {p}/{t}" for d, (p, t) in sorted(dtypes.items())))
