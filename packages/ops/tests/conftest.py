"""Tests of torch-npu-ops: every op compared against the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import unittest

import pytest

# These tests check the asynchronous paths from each process's first op on:
# no background warm-up that runs the first ops synchronously (Note [Python
# meta kernels and the first op]; test_meta_warmup.py tests it). Set before
# torch_npu loads, and inherited by the processes the tests start.
os.environ.setdefault("TORCH_NPU_META_WARMUP", "0")

import torch  # noqa: E402

import torch_npu  # noqa: E402,F401
from torch.testing._internal import common_utils  # noqa: E402
from torch.testing._internal.opinfo import core as opinfo_core  # noqa: E402


def _extract_test_fn_without_source():
    """common_utils.extract_test_fn, minus the cost: it finds the running
    test method with inspect.stack(), which reads the source lines of every
    frame, at every OpInfo.sample_inputs call (80% of the OpInfo sweeps'
    time). The same search over the frames themselves."""
    try:
        frame = sys._getframe(1)
        while frame is not None:
            self_val = frame.f_locals.get("self")
            if isinstance(self_val, unittest.TestCase):
                *_, cls_name, test_name = self_val.id().rsplit(".", 2)
                if cls_name == type(self_val).__name__ and test_name.startswith("test"):
                    return getattr(self_val, test_name).__func__
            frame = frame.f_back
    except Exception:  # noqa: BLE001 - as the original: no test found
        pass
    return None


common_utils.extract_test_fn = _extract_test_fn_without_source
opinfo_core.extract_test_fn = _extract_test_fn_without_source


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
# OpInfo entries that match the CPU, and the per-dtype totals. An entry
# matches when its test passed and some sample's values were compared; the
# passing entries that compared less (random ops: structure only; samples
# both devices refuse: the exception type only) are counted apart. A known
# failure (xfail) counts as failing.
OPINFO_TEST = "test_opinfo_conformance.py::test_opinfo["


def _write_opinfo_summary(terminalreporter) -> None:
    entries: dict[str, bool] = {}
    checked: dict[str, list[str]] = {}
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
                if name == "opinfo_checked":
                    checked[nodeid] = value
                if name == "opinfo_dtypes":
                    for dtype, passed in value.items():
                        totals = dtypes.setdefault(dtype, [0, 0])
                        totals[0] += int(passed)
                        totals[1] += 1
    if not entries:
        return
    total = len(entries)
    passing = [n for n, ok in entries.items() if ok]
    matched = [n for n in passing if "values" in checked.get(n, [])]
    structure = [n for n in passing if n not in matched and "structure" in checked.get(n, [])]
    raised = [n for n in passing if n not in matched and n not in structure]
    terminalreporter.write_sep("-", "OpInfo conformance")
    terminalreporter.write_line(
        f"OpInfo conformance: {len(matched)}/{total} entries match the CPU's values "
        f"({100.0 * len(matched) / total:.1f}%); also passing: {len(structure)} random ops on shapes and dtypes "
        f"only, {len(raised)} whose every sample both devices refuse (same exception type)")
    if raised:
        terminalreporter.write_line("refused on both: " + ", ".join(
            n.split("[", 1)[1].rstrip("]") for n in sorted(raised)))
    terminalreporter.write_line(
        "per dtype (entries passing/tested): "
        + ", ".join(f"{d} {p}/{t}" for d, (p, t) in sorted(dtypes.items())))


# PyTorch's device contract (test_device_contract.py): per check and device,
# how many OpInfo / ModuleInfo cases pass, fail as listed in
# contract_known_failures.json (xfail), or fail. A check's cases on the CPU
# say how strict the check is: the CPU is the reference npu follows.
CONTRACT_TEST = "test_device_contract.py::"
CONTRACT_CHECKS = ("test_errors", "test_dtypes", "test_out", "test_noncontiguous_samples", "test_results_match_cpu",
                   "test_multiple_devices", "test_module_matches_cpu", "test_module_round_trips")


def _contract_counts(terminalreporter) -> dict[tuple[str, str], dict[str, int]]:
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for category in ("passed", "failed", "xfailed", "xpassed", "error", "skipped"):
        for report in terminalreporter.stats.get(category, []):
            nodeid = getattr(report, "nodeid", "")
            if CONTRACT_TEST not in nodeid or (report.when != "call" and category not in ("error", "skipped")):
                continue
            test = nodeid.rsplit("::", 1)[-1]
            check = next((c for c in CONTRACT_CHECKS if test.startswith(c + "_")), None)
            if check is None:
                continue
            device = "cpu" if "CPU::" in nodeid else "npu"
            bucket = counts.setdefault((check, device), {})
            bucket[category] = bucket.get(category, 0) + 1
    return counts


def _write_contract_summary(terminalreporter) -> None:
    counts = _contract_counts(terminalreporter)
    if not counts:
        return
    terminalreporter.write_sep("-", "PyTorch device contract")
    for check in CONTRACT_CHECKS:
        for device in ("cpu", "npu"):
            c = counts.get((check, device))
            if not c:
                continue
            total = sum(c.values())
            terminalreporter.write_line(
                f"{check:28s} {device}: {c.get('passed', 0)}/{total} pass, {c.get('xfailed', 0)} known failures, "
                f"{c.get('failed', 0) + c.get('error', 0) + c.get('xpassed', 0)} unexpected, "
                f"{c.get('skipped', 0)} skipped")


def pytest_terminal_summary(terminalreporter):
    _write_opinfo_summary(terminalreporter)
    _write_contract_summary(terminalreporter)
