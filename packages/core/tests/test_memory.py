"""The caching device allocator: statistics, caching, record_stream, OOM."""

from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401

MiB = 1 << 20


@pytest.fixture(autouse=True)
def clean_allocator():
    torch.npu.synchronize()
    torch.npu.empty_cache()
    torch.npu.reset_peak_memory_stats()
    yield
    torch.npu.synchronize()
    torch.npu.empty_cache()


def test_allocated_and_reserved_follow_allocations():
    base = torch.npu.memory_allocated()
    t = torch.empty(MiB // 4, device="npu")  # 1 MiB of float32
    assert torch.npu.memory_allocated() == base + MiB
    assert torch.npu.memory_reserved() >= torch.npu.memory_allocated()
    assert torch.npu.max_memory_allocated() >= base + MiB
    del t
    assert torch.npu.memory_allocated() == base
    reserved = torch.npu.memory_reserved()
    assert reserved > 0  # cached, not returned
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() < reserved


def test_cache_reuses_blocks():
    t = torch.empty(1000, device="npu")
    ptr = t.data_ptr()
    del t
    u = torch.empty(1000, device="npu")
    assert u.data_ptr() == ptr
    stats = torch.npu.memory_stats()
    assert stats["num_device_alloc"] >= 1


def test_memory_stats_keys_match_torch_cuda():
    torch.empty(10, device="npu")
    stats = torch.npu.memory_stats()
    for key in [
        "allocated_bytes.all.current", "allocated_bytes.all.peak", "allocated_bytes.small_pool.current",
        "reserved_bytes.all.current", "reserved_bytes.large_pool.peak", "active_bytes.all.current",
        "requested_bytes.all.current", "segment.all.current", "allocation.all.allocated",
        "inactive_split_bytes.all.current", "num_alloc_retries", "num_ooms",
    ]:
        assert key in stats, key
    accel = torch.accelerator.memory_stats(0)
    assert accel["allocated_bytes.all.current"] == stats["allocated_bytes.all.current"]
    assert torch.accelerator.memory_allocated(0) == torch.npu.memory_allocated(0)


def test_peak_reset_and_accumulated_reset():
    t = torch.empty(4 * MiB, device="npu")
    del t
    assert torch.npu.max_memory_allocated() >= 16 * MiB
    torch.npu.reset_peak_memory_stats()
    assert torch.npu.max_memory_allocated() == torch.npu.memory_allocated()
    torch.npu.reset_accumulated_memory_stats()
    assert torch.npu.memory_stats()["allocation.all.allocated"] == 0


def test_mem_get_info_tracks_reserved_memory():
    free_before, total = torch.npu.mem_get_info()
    assert 0 < free_before <= total == torch.npu.get_device_properties(0).total_memory
    t = torch.empty(64 * MiB, device="npu")
    free_after, _ = torch.npu.mem_get_info()
    assert free_before - free_after >= 256 * MiB
    assert torch.accelerator.get_memory_info(0) == torch.npu.mem_get_info(0)
    del t


def test_out_of_memory_is_catchable_and_recoverable():
    total = torch.npu.get_device_properties(0).total_memory
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(total // 2 + total, dtype=torch.uint8, device="npu")
    message = str(info.value)
    for fragment in ["Tried to allocate", "total capacity", "is free", "allocated by PyTorch", "reserved"]:
        assert fragment in message, message
    assert torch.npu.memory_stats()["num_ooms"] >= 1
    t = torch.ones(16).npu()
    assert t.cpu().sum().item() == 16


def test_memory_fraction_limits_and_validates():
    total = torch.npu.get_device_properties(1).total_memory
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        torch.npu.set_per_process_memory_fraction(1.5, 1)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        torch.npu.set_per_process_memory_fraction(-0.1, 1)
    torch.npu.set_per_process_memory_fraction(0.25, 1)
    try:
        assert torch.npu.get_per_process_memory_fraction(1) == 0.25
        with pytest.raises(torch.OutOfMemoryError, match="set_per_process_memory_fraction"):
            torch.empty(total // 2, dtype=torch.uint8, device="npu:1")
        ok = torch.empty(total // 8, dtype=torch.uint8, device="npu:1")
        del ok
    finally:
        torch.npu.set_per_process_memory_fraction(1.0, 1)
        torch.npu.empty_cache()


def test_record_stream_delays_reuse_until_the_stream_is_done():
    side = torch.npu.Stream()
    t = torch.empty(4096, device="npu")
    ptr = t.data_ptr()
    with torch.npu.stream(side):
        torch.npu._sleep(200)
    t.record_stream(side)
    del t
    # The side stream may still be using the block: it must not be reused.
    u = torch.empty(4096, device="npu")
    assert u.data_ptr() != ptr
    side.synchronize()
    del u
    v = torch.empty(4096, device="npu")
    w = torch.empty(4096, device="npu")
    assert ptr in (v.data_ptr(), w.data_ptr())


def test_allocations_on_different_streams_do_not_share_cached_blocks():
    s = torch.npu.Stream()
    t = torch.empty(2048, device="npu")
    ptr = t.data_ptr()
    del t
    with torch.npu.stream(s):
        u = torch.empty(2048, device="npu")
    assert u.data_ptr() != ptr
