"""Checks shared by every test run of the tree (pytest.ini makes the
repository root pytest's rootdir, so this file applies to every package's
tests and to tests/)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable

import pytest


def _npu_bytes_allocated() -> int:
    """Bytes the caching allocator holds for tensors, over every device; 0
    before torch_npu has touched a device (asking must not initialise one)."""
    if "torch_npu" not in sys.modules:
        return 0
    import torch

    if not torch.npu.is_initialized():
        return 0
    return sum(torch.npu.memory_allocated(d) for d in range(torch.npu.device_count()))


@pytest.fixture
def npu_bytes_allocated() -> Callable[[], int]:
    """The function giving the bytes tensors hold on every npu device (0
    before torch_npu has initialised one)."""
    return _npu_bytes_allocated


# Note [Test modules hold no device memory]: pytest imports every test module
# before it runs the first test, so a module that makes npu tensors at import
# keeps them allocated for the whole session, and tests that count the
# allocator's memory fail far from the cause (it happened: 14 KiB of graph
# test inputs broke four allocator tests of core). A module whose import
# leaves npu memory allocated fails its collection, naming itself.
@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    before = _npu_bytes_allocated() if isinstance(collector, pytest.Module) else 0
    report = yield
    if isinstance(collector, pytest.Module) and report.passed:
        held = _npu_bytes_allocated() - before
        if held > 0:
            report.outcome = "failed"
            report.longrepr = (
                f"importing {collector.nodeid} left {held} bytes of npu memory allocated: pytest "
                "imports every test module before running any test, so tensors made at import stay "
                "alive all session (and tests that count the allocator's memory fail). Make npu "
                "tensors inside the tests or in fixtures (Note [Test modules hold no device memory])."
            )
    return report


# Note [The heap is frozen after collection]: once every test module is
# imported, torch, Dynamo, Inductor, transformers and the OpInfo database hold
# about half a million objects that live for the whole session, and every full
# collection walks them all: 0.2-0.4 s each on 2 cores, paid by the automatic
# collector, by tests that collect to settle the allocator, and by every
# `torch.npu.graph` capture (it collects first, as torch.cuda.graph does).
# Freezing them (gc.freeze) takes them out of the collector's walk; a cycle
# among them could no longer be freed, but they live until exit anyway. The
# collection first frees what importing left behind.
def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()
