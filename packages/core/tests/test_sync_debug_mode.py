"""torch.npu.set_sync_debug_mode: the operations that make the host wait for
the device warn or raise, as with torch.cuda.set_sync_debug_mode (Note
[Synchronizing operations], csrc/npu/SyncDebugMode.h). Ops whose result
sizes depend on the data are checked with the ops package
(packages/ops/tests/test_sync_debug_mode_ops.py)."""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401
from torch_npu.npu._testing import SYNC_MESSAGE as MESSAGE
from torch_npu.npu._testing import sync_debug_mode


def test_the_mode_is_set_and_read_as_on_cuda():
    assert torch.npu.get_sync_debug_mode() == 0
    try:
        for value, expected in [("warn", 1), ("error", 2), (1, 1), (2, 2)]:
            torch.npu.set_sync_debug_mode(value)
            assert torch.npu.get_sync_debug_mode() == expected
    finally:
        torch.npu.set_sync_debug_mode(0)
    torch.npu.set_sync_debug_mode("default")
    assert torch.npu.get_sync_debug_mode() == 0
    for bad in ("loud", 3, -1, 1.0, True):
        with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
            torch.npu.set_sync_debug_mode(bad)
    assert torch.npu.get_sync_debug_mode() == 0


def test_waiting_operations_warn():
    x = torch.arange(4.0).npu()
    for name, fn in [("item", lambda: x[1].item()), ("cpu", lambda: x.cpu()), ("tolist", lambda: x.tolist()),
                     ("blocking host-to-device copy", lambda: torch.ones(3).npu()),
                     ("torch.tensor on npu", lambda: torch.tensor([1.0, 2.0], device="npu"))]:
        with sync_debug_mode("warn") as caught:
            fn()
        assert caught, name


def test_explicit_and_asynchronous_work_does_not_warn():
    x = torch.arange(4.0).npu()
    pinned = torch.ones(4).pin_memory()
    host = torch.empty(4).pin_memory()
    stream = torch.npu.Stream()
    event = torch.npu.Event()
    with sync_debug_mode("error") as caught:
        y = pinned.to("npu", non_blocking=True)
        host.copy_(y, non_blocking=True)
        event.record()
        event.synchronize()
        stream.synchronize()
        torch.npu.synchronize()
        x.clone()
    assert caught == []
    assert host.tolist() == [1.0] * 4


def test_error_mode_raises_before_anything_is_queued():
    # The refusal comes before the copy is queued: no device work writes into
    # the host buffer a raise frees. Repeated, a write after the free would
    # corrupt the host heap.
    x = torch.arange(1000.0).npu()
    with sync_debug_mode("error"):
        for _ in range(200):
            with pytest.raises(RuntimeError, match=MESSAGE):
                x.cpu()
            with pytest.raises(RuntimeError, match=MESSAGE):
                x[3].item()
            with pytest.raises(RuntimeError, match=MESSAGE):
                torch.ones(1000).npu()
    torch.npu.synchronize()
    assert torch.equal(x.cpu(), torch.arange(1000.0))
    assert [torch.ones(1000).npu().sum().item() for _ in range(3)] == [1000.0] * 3
