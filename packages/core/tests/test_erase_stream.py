"""torch_npu.erase_stream (the inverse of Tensor.record_stream) and
record_stream's checks."""

from __future__ import annotations

import pytest
import torch

import torch_npu

MiB = 1 << 20


def filled(nbytes: int, value: int) -> torch.Tensor:
    return torch.full((nbytes,), value, dtype=torch.uint8, device="npu")


def test_erase_stream_returns_memory_at_once():
    side = torch.npu.Stream()
    t = filled(4 * MiB, 1)
    ptr = t.data_ptr()
    with torch.npu.stream(side):
        torch.npu._sleep(100 * torch.npu._cycles_per_ms())
    t.record_stream(side)
    torch_npu.erase_stream(t, side)
    # The use on `side` is gone: the block is cached as soon as it is freed
    # (the caller ordered later work after `side`, as Work.wait() does).
    torch.npu.current_stream().wait_stream(side)
    del t
    again = filled(4 * MiB, 2)
    assert again.data_ptr() == ptr
    assert int(again.cpu().max()) == 2
    side.synchronize()


def test_erase_stream_of_a_stream_not_recorded_changes_nothing():
    side = torch.npu.Stream()
    t = filled(1024, 3)
    torch_npu.erase_stream(t, side)
    torch_npu.erase_stream(torch.empty(0, device="npu"), side)
    assert int(t.cpu().max()) == 3


def test_erase_and_record_stream_bad_input():
    side = torch.npu.Stream()
    t = filled(1024, 3)
    allocated = torch.npu.memory_allocated()
    with pytest.raises(TypeError, match="torch.Tensor"):
        torch_npu.erase_stream([1, 2], side)
    with pytest.raises(TypeError, match="torch.npu.Stream"):
        torch_npu.erase_stream(t, "stream")
    with pytest.raises(RuntimeError, match="not on an npu device"):
        torch_npu.erase_stream(torch.ones(2), side)
    other_device = torch.npu.Stream(device=1)
    with pytest.raises(RuntimeError, match="stream of the tensor's device"):
        torch_npu.erase_stream(t, other_device)
    with pytest.raises(RuntimeError, match="stream of the tensor's device"):
        t.record_stream(other_device)
    # Nothing changed: the allocation goes on.
    assert torch.npu.memory_allocated() == allocated
    u = filled(1024, 4)
    assert int(t.cpu().max()) == 3 and int(u.cpu().max()) == 4
