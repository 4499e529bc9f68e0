"""The caching device allocator: statistics, caching, record_stream, OOM."""

from __future__ import annotations

import gc

import pytest
import torch

import torch_npu  # noqa: F401

MiB = 1 << 20


@pytest.fixture(autouse=True)
def clean_allocator():
    # Tensors of earlier tests kept alive by reference cycles (exception
    # tracebacks) would otherwise be freed by the garbage collector in the
    # middle of a test and move its baseline.
    gc.collect()
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
        torch.npu._sleep(200 * torch.npu._cycles_per_ms())
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


def _stat(name: str) -> int:
    return torch.npu.memory_stats()[name]


def test_same_size_reuse_returns_the_block_just_freed_and_keeps_stats():
    # Warm: the first allocation of this size may take a new segment.
    del_first = torch.empty(1000, device="npu")
    del del_first
    base_alloc, base_active = _stat("allocated_bytes.all.current"), _stat("active_bytes.all.current")
    base_count, base_reserved = _stat("allocation.all.current"), torch.npu.memory_reserved()
    ptrs = set()
    for _ in range(50):
        t = torch.empty(1000, device="npu")  # 4000 bytes, rounds to 4096
        ptrs.add(t.data_ptr())
        assert _stat("allocated_bytes.all.current") == base_alloc + 4096
        assert _stat("active_bytes.all.current") == base_active + 4096
        assert _stat("allocation.all.current") == base_count + 1
        assert _stat("requested_bytes.all.current") >= 4000
        del t
    assert len(ptrs) == 1  # always the block freed last
    assert _stat("allocated_bytes.all.current") == base_alloc
    assert _stat("active_bytes.all.current") == base_active
    assert torch.npu.memory_reserved() == base_reserved  # no segment taken


def test_freed_split_blocks_count_as_inactive_splits_and_merge_back():
    # Tensors other tests left alive may keep a segment split: compare.
    base_splits = _stat("inactive_split.all.current")
    base_split_bytes = _stat("inactive_split_bytes.all.current")
    a = torch.empty(1024, device="npu")
    b = torch.empty(1024, device="npu")
    c = torch.empty(1024, device="npu")
    split_bytes = _stat("inactive_split_bytes.all.current")
    del b  # between two live blocks: a free piece, whether cached for reuse or pooled
    assert _stat("inactive_split_bytes.all.current") == split_bytes + 4096
    assert _stat("inactive_split.all.current") >= 1
    del a, c
    torch.npu.empty_cache()
    assert _stat("inactive_split.all.current") == base_splits
    assert _stat("inactive_split_bytes.all.current") == base_split_bytes


def test_parked_blocks_merge_before_a_new_segment_is_taken():
    # One 2 MiB small-pool segment, used up: 512 KiB + 512 KiB + 1 MiB (on
    # a side stream, whose pool holds nothing else after empty_cache).
    kib = 1024
    with torch.npu.stream(torch.npu.Stream()):
        a = torch.empty(512 * kib, dtype=torch.uint8, device="npu")
        b = torch.empty(512 * kib, dtype=torch.uint8, device="npu")
        c = torch.empty(1024 * kib, dtype=torch.uint8, device="npu")
        assert b.data_ptr() == a.data_ptr() + 512 * kib
        assert c.data_ptr() == b.data_ptr() + 512 * kib
        start = a.data_ptr()
        segments = _stat("num_device_alloc")
        reserved = torch.npu.memory_reserved()
        del a, b  # free neighbours of one size; together they hold 1 MiB
        d = torch.empty(1024 * kib, dtype=torch.uint8, device="npu")
        assert d.data_ptr() == start
        assert _stat("num_device_alloc") == segments
        assert torch.npu.memory_reserved() == reserved
        del c, d


def test_empty_cache_returns_segments_holding_recently_freed_blocks():
    reserved = torch.npu.memory_reserved()
    splits = _stat("inactive_split.all.current")
    allocated = torch.npu.memory_allocated()
    # Many sizes (more than are cached for fast reuse), freed out of order
    # so that neighbours are freed while others are still cached; on a side
    # stream, so that they take a segment of their own.
    with torch.npu.stream(torch.npu.Stream()):
        tensors = [torch.empty(n * 128, device="npu") for n in range(1, 40)]
    assert torch.npu.memory_reserved() > reserved
    for i in list(range(0, 39, 2)) + list(range(1, 39, 2)):
        tensors[i] = None
        assert _stat("active.all.current") == _stat("allocation.all.current")
    assert torch.npu.memory_allocated() == allocated
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() == reserved
    assert _stat("inactive_split.all.current") == splits


def test_fast_reuse_never_crosses_streams_and_raw_pointers_free_on_any_device():
    s = torch.npu.Stream()
    t = torch.empty(3000, device="npu")
    ptr = t.data_ptr()
    del t
    with torch.npu.stream(s):
        u = torch.empty(3000, device="npu")
    assert u.data_ptr() != ptr
    # Freed while another device is current: found through that device.
    with torch.npu.device(1):
        del u
    v = torch.empty(3000, device="npu")
    assert v.data_ptr() == ptr


def test_random_allocations_never_overlap_and_stats_add_up():
    import random

    rng = random.Random(1234)
    streams = [torch.npu.current_stream(), torch.npu.Stream()]
    base_allocated = torch.npu.memory_allocated()
    base_reserved = torch.npu.memory_reserved()
    sizes = [512, 4096, 8192, 100_000, 700_000, 3 * MiB, 12 * MiB]
    live: dict[int, torch.Tensor] = {}
    for step in range(600):
        if live and (rng.random() < 0.45 or len(live) > 40):
            del live[rng.choice(list(live))]
        else:
            with torch.npu.stream(rng.choice(streams)):
                live[step] = torch.empty(rng.choice(sizes) - rng.randrange(0, 400), dtype=torch.uint8, device="npu")
        spans = sorted((t.data_ptr(), t.data_ptr() + t.numel()) for t in live.values())
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert end <= start, "two live allocations overlap"
        expected = sum(-(-t.numel() // 512) * 512 for t in live.values())
        assert torch.npu.memory_allocated() == base_allocated + expected
    live.clear()
    assert torch.npu.memory_allocated() == base_allocated
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() == base_reserved
