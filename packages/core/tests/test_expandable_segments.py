"""Expandable segments of the caching allocator (Note [Expandable segments]
in NPUCachingAllocator.h): one reserved virtual range per (stream, size
class) that grows by mapping physical chunks at its end and gives its free
end back at empty_cache, through CANN's virtual-memory functions (the
simulator maps real pages at the reserved addresses), and gives the free
chunks in its middle back before it grows (Note [Holes in expandable
segments]) and, before any segment maps more, the free chunks of every
segment whose stream is idle (Note [Reclaiming free chunks]).
"""

from __future__ import annotations

import gc
import random

import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.npu import memory

MiB = 1 << 20
CHUNK = 2 * MiB  # the simulator's virtual-memory granularity


# Memory earlier tests in this process still hold (their pools, module-level
# tensors); the tests count reserved memory above it.
_baseline = 0


def reserved() -> int:
    """Bytes reserved on npu:0 since the test began."""
    return torch.npu.memory_reserved() - _baseline


@pytest.fixture(autouse=True)
def expandable():
    global _baseline
    gc.collect()
    torch.npu.synchronize()
    torch.npu.empty_cache()
    _baseline = torch.npu.memory_reserved()
    memory._set_allocator_settings("expandable_segments:True")
    try:
        yield
    finally:
        memory._set_allocator_settings("expandable_segments:False")
        gc.collect()
        torch.npu.synchronize()
        torch.npu.empty_cache()


def filled(nbytes: int, value: int, device: str = "npu") -> torch.Tensor:
    return torch.full((nbytes,), value, dtype=torch.uint8, device=device)


# Contents are checked on the CPU (.cpu() first): a reduction on the device
# would cache device-work memory, which memory_reserved() counts too.


def expandable_segments(device: int = 0) -> list[dict]:
    return [s for s in torch.npu.memory._snapshot()["segments"]
            if s["is_expandable"] and s["device"] == device]


def segment_of(ptr: int) -> dict:
    for s in torch.npu.memory._snapshot()["segments"]:
        if s["address"] <= ptr < s["address"] + s["total_size"]:
            return s
    raise AssertionError(f"{ptr:#x} is in no segment")


def assert_consistent(device: int = 0) -> None:
    """Segments tile their blocks and add up to the allocator's statistics."""
    segments = [s for s in torch.npu.memory._snapshot()["segments"] if s["device"] == device]
    stats = torch.npu.memory_stats(device)
    assert sum(s["total_size"] for s in segments) == torch.npu.memory_reserved(device)
    allocated = sum(b["size"] for s in segments for b in s["blocks"] if b["state"] == "active_allocated")
    assert allocated == torch.npu.memory_allocated(device)
    assert len(segments) == stats["segment.all.current"]
    for s in segments:
        assert sum(b["size"] for b in s["blocks"]) == s["total_size"]
        address = s["address"]
        for b in s["blocks"]:
            assert b["address"] == address
            address += b["size"]
        if s["is_expandable"]:
            assert s["total_size"] % CHUNK == 0


def test_segment_grows_in_place_without_copying():
    a = filled(30 * MiB, 7)
    seg = segment_of(a.data_ptr())
    assert seg["is_expandable"] and seg["total_size"] == 30 * MiB
    base = seg["address"]
    b = filled(50 * MiB, 3)
    # The next block follows at the end of the same range: the segment grew
    # by mapping more chunks, the first tensor did not move.
    assert b.data_ptr() == a.data_ptr() + 30 * MiB
    grown = segment_of(b.data_ptr())
    assert grown["address"] == base and grown["total_size"] == 80 * MiB
    assert reserved() == 80 * MiB
    assert [(x["address"], x["segment_type"]) for x in expandable_segments()] == [(base, "large")]
    assert int(a.cpu().sum()) == 7 * 30 * MiB and int(b.cpu().sum()) == 3 * 50 * MiB
    assert_consistent()


def test_free_end_of_segment_grows_with_it():
    a = filled(10 * MiB, 1)
    b = filled(6 * MiB, 2)
    del b  # a free 6 MiB block at the end
    c = filled(12 * MiB, 5)
    # The free end grew by 2 MiB instead of a new 12 MiB mapping.
    assert c.data_ptr() == a.data_ptr() + 10 * MiB
    assert reserved() == 22 * MiB
    assert int(c.cpu().sum()) == 5 * 12 * MiB
    assert_consistent()


def test_empty_cache_unmaps_the_free_end():
    a = filled(20 * MiB, 1)
    b = filled(40 * MiB, 2)
    assert reserved() == 60 * MiB
    del b
    assert reserved() == 60 * MiB  # cached until emptied
    torch.npu.empty_cache()
    assert reserved() == 20 * MiB
    assert int(a.cpu().sum()) == 20 * MiB
    assert_consistent()
    del a
    torch.npu.empty_cache()
    assert reserved() == 0
    assert expandable_segments() == []
    # The range is kept and maps again from its start.
    c = filled(4 * MiB, 9)
    assert int(c.cpu().sum()) == 9 * 4 * MiB
    assert reserved() == 4 * MiB
    assert_consistent()


def test_empty_cache_keeps_chunks_partly_in_use():
    a = filled(5 * MiB // 2, 1)  # ends inside the second chunk
    b = filled(9 * MiB, 2)
    del b
    torch.npu.empty_cache()
    assert reserved() == 4 * MiB
    seg = segment_of(a.data_ptr())
    assert [(blk["size"], blk["state"]) for blk in seg["blocks"]] == [
        (5 * MiB // 2, "active_allocated"), (3 * MiB // 2, "inactive")]
    assert_consistent()


def test_random_trace_keeps_statistics_and_snapshot_consistent():
    rng = random.Random(17)
    live: list[tuple[torch.Tensor, int]] = []
    for step in range(300):
        if live and rng.random() < 0.45:
            live.pop(rng.randrange(len(live)))
        else:
            value = rng.randrange(1, 250)
            size = rng.choice([rng.randint(1, 64 << 10), rng.randint(1 << 20, 24 << 20)])
            live.append((filled(size, value), value))
        if step % 50 == 0:
            assert_consistent()
        if step % 120 == 119:
            torch.npu.empty_cache()
            assert_consistent()
    for t, value in live:
        assert int(t.cpu().min()) == value and int(t.cpu().max()) == value
    assert any(s["segment_type"] == "small" for s in expandable_segments())
    del t
    live.clear()
    torch.npu.empty_cache()
    assert reserved() == 0


def test_each_stream_grows_its_own_segment():
    side = torch.npu.Stream()
    a = filled(8 * MiB, 1)
    with torch.npu.stream(side):
        b = filled(8 * MiB, 2)
    side.synchronize()
    sa, sb = segment_of(a.data_ptr()), segment_of(b.data_ptr())
    assert sa["is_expandable"] and sb["is_expandable"]
    assert sa["address"] != sb["address"] and sa["stream"] != sb["stream"]
    assert int(a.cpu().sum()) == 8 * MiB and int(b.cpu().sum()) == 16 * MiB
    assert_consistent()


def test_free_chunks_in_the_middle_are_given_back_before_the_segment_grows():
    a = filled(8 * MiB, 1)
    b = filled(16 * MiB, 2)
    c = filled(8 * MiB, 3)
    assert reserved() == 32 * MiB
    del b  # 8 free chunks between a and c
    d = filled(20 * MiB, 4)  # too large for them: the segment grows at its end
    assert d.data_ptr() == c.data_ptr() + 8 * MiB
    # ... after unmapping them: 8 + 8 + 20 MiB, not 52.
    assert reserved() == 36 * MiB
    # As torch.cuda's snapshots: a segment per run of mapped chunks.
    runs = sorted((s["address"] - a.data_ptr(), s["total_size"]) for s in expandable_segments())
    assert runs == [(0, 8 * MiB), (24 * MiB, 28 * MiB)]
    assert torch.npu.memory_stats()["segment.all.current"] == len(torch.npu.memory._snapshot()["segments"])
    assert_consistent()
    # A block taken from the hole maps its chunks again, and holds data.
    e = filled(12 * MiB, 5)
    assert e.data_ptr() == a.data_ptr() + 8 * MiB
    assert reserved() == 48 * MiB
    runs = sorted((s["address"] - a.data_ptr(), s["total_size"]) for s in expandable_segments())
    assert runs == [(0, 20 * MiB), (24 * MiB, 28 * MiB)]
    assert_consistent()
    for t, value in ((a, 1), (c, 3), (d, 4), (e, 5)):
        assert int(t.cpu().min()) == value and int(t.cpu().max()) == value
    # Freeing everything and emptying the cache leaves nothing mapped.
    del a, c, d, e, t
    torch.npu.empty_cache()
    assert reserved() == 0 and expandable_segments() == []


def test_a_large_request_takes_the_lowest_free_block_that_fits():
    # Note [Placement in expandable segments]: address-ordered first fit.
    a = filled(4 * MiB, 1)
    low = filled(10 * MiB, 0)
    b = filled(4 * MiB, 2)
    high = filled(7 * MiB, 0)
    c = filled(4 * MiB, 3)
    del low, high
    x = filled(6 * MiB, 4)
    # Best fit would take the 7 MiB block; the 10 MiB one lies lower, and
    # the request takes its front.
    assert x.data_ptr() == a.data_ptr() + 4 * MiB
    assert_consistent()
    for t, value in ((a, 1), (b, 2), (c, 3), (x, 4)):
        assert int(t.cpu().min()) == value and int(t.cpu().max()) == value


def test_a_free_block_with_holes_hands_out_its_front():
    a = filled(8 * MiB, 1)
    b = filled(16 * MiB, 2)
    c = filled(8 * MiB, 3)
    del b
    d = filled(20 * MiB, 4)  # b's chunks are unmapped before the segment grows
    assert reserved() == 36 * MiB
    del c  # one free block: b's 16 unmapped MiB, then c's 8 mapped ones
    e = filled(6 * MiB, 5)
    # From the block's front, next to a, although its mapped end would have
    # needed no mapping (Note [Placement in expandable segments]): it maps
    # its 3 chunks, or moves c's there (Note [Reclaiming free chunks]).
    assert e.data_ptr() == a.data_ptr() + 8 * MiB
    assert reserved() <= 42 * MiB
    assert_consistent()
    for t, value in ((a, 1), (d, 4), (e, 5)):
        assert int(t.cpu().min()) == value and int(t.cpu().max()) == value


def test_caches_growing_token_by_token_pack_together():
    # A KV cache per layer, replaced at every token by one 128 KiB longer,
    # allocated before the shorter one is freed (the kv-cache traces of
    # benchmarks/allocator_traces.py). First fit packs the live caches side
    # by side (Note [Placement in expandable segments]), so that they hold
    # partial chunks only at the ends of that one run; best fit, carving the
    # end of a free block that maps less, left them in 4 runs here.
    layers, step = 6, 128 * 1024
    caches: list[torch.Tensor | None] = [None] * layers
    for token in range(10, 101):
        for i in range(layers):
            caches[i] = torch.empty(token * step, dtype=torch.uint8, device="npu")
    blocks = sorted((b["address"], b["size"]) for s in expandable_segments() for b in s["blocks"]
                    if b["state"] == "active_allocated")
    assert sorted(blocks) == sorted((t.data_ptr(), 100 * step) for t in caches)
    gaps = [(q - p - n) // MiB for (p, n), (q, _) in zip(blocks, blocks[1:]) if p + n != q]
    assert gaps == []
    assert_consistent()


def test_free_chunks_of_another_segment_are_given_back_before_mapping_more():
    # Note [Reclaiming free chunks]: the small pool's segment gives its free
    # chunks back when the large one needs memory, once its stream is idle.
    small = [filled(512 * 1024, 1) for _ in range(12)]
    assert reserved() == 6 * MiB
    del small
    torch.npu.synchronize()  # the stream is idle: nothing queued uses them
    big = filled(20 * MiB, 2)
    assert reserved() == 20 * MiB
    assert_consistent()
    # The small segment maps a chunk again when it needs one.
    again = filled(512 * 1024, 3)
    assert reserved() == 22 * MiB
    assert_consistent()
    assert int(big.cpu().min()) == 2 and int(again.cpu().max()) == 3


def test_free_chunks_of_a_busy_stream_stay_mapped():
    small = [filled(512 * 1024, 1) for _ in range(12)]
    # Work queued after them may still use their memory: without draining
    # the stream, their chunks are not given back.
    torch.npu._sleep(torch.npu._cycles_per_ms() * 500)
    del small
    big = filled(20 * MiB, 2)
    assert reserved() == 26 * MiB
    torch.npu.synchronize()
    assert int(big.cpu().max()) == 2
    assert_consistent()


def test_memory_another_stream_may_still_use_keeps_its_chunks():
    side = torch.npu.Stream()
    a = filled(8 * MiB, 1)
    b = filled(16 * MiB, 2)
    c = filled(8 * MiB, 3)
    with torch.npu.stream(side):
        # Busy well past d's allocation (no op whose first call the host
        # waits for: Note [Errors at the call]).
        torch.npu._sleep(torch.npu._cycles_per_ms() * 500)
    b.record_stream(side)  # as if the side stream's work used b
    del b
    before = reserved()
    d = filled(20 * MiB, 4)
    # b's chunks wait for the side stream's use: they stay mapped.
    assert reserved() == before + 20 * MiB
    side.synchronize()
    assert int(d.cpu().max()) == 4 and int(a.cpu().max()) == 1 and int(c.cpu().max()) == 3
    assert_consistent()


def test_kernels_read_and_write_across_chunks():
    # Under NPU_SIM_CHECKER=1 (the suite's setting) device work on a range
    # spanning several mapped chunks is checked against the mappings.
    x = torch.arange(5 * MiB // 4, dtype=torch.float32, device="npu")
    y = x * 2 + 1
    assert segment_of(y.data_ptr())["is_expandable"]
    expected = torch.arange(5 * MiB // 4, dtype=torch.float32) * 2 + 1
    assert torch.equal(y.cpu(), expected)
    z = torch.empty_like(y)
    z.copy_(y)
    assert torch.equal(z.cpu(), expected)


def test_history_traces_segment_map_and_unmap():
    torch.npu.memory._record_memory_history(stacks="python")
    try:
        a = filled(6 * MiB, 1)
        del a
        torch.npu.empty_cache()
        trace = torch.npu.memory._snapshot()["device_traces"][0]
    finally:
        torch.npu.memory._record_memory_history(enabled=None)
    actions = [e["action"] for e in trace]
    assert "segment_map" in actions and "segment_unmap" in actions
    mapped = sum(e["size"] for e in trace if e["action"] == "segment_map")
    unmapped = sum(e["size"] for e in trace if e["action"] == "segment_unmap")
    assert mapped == unmapped == 6 * MiB


def test_toggling_at_run_time_applies_to_new_memory():
    memory._set_allocator_settings("expandable_segments:False")
    fixed = filled(12 * MiB, 1)
    assert not segment_of(fixed.data_ptr())["is_expandable"]
    memory._set_allocator_settings("expandable_segments:True")
    grown = filled(12 * MiB, 2)
    assert segment_of(grown.data_ptr())["is_expandable"]
    # The fixed segment stays and serves requests that fit it.
    del fixed
    again = filled(12 * MiB, 3)
    assert not segment_of(again.data_ptr())["is_expandable"]
    assert_consistent()
    memory._set_allocator_settings("expandable_segments:False")
    # The expandable segment serves its mapped blocks but grows no more.
    del grown
    reuse = filled(12 * MiB, 4)
    assert segment_of(reuse.data_ptr())["is_expandable"]
    new = filled(30 * MiB, 5)
    assert not segment_of(new.data_ptr())["is_expandable"]
    assert [int(t.cpu().max()) for t in (again, reuse, new)] == [3, 4, 5]
    assert_consistent()
    del again, reuse, new
    torch.npu.empty_cache()
    assert reserved() == 0


def test_private_pools_keep_fixed_segments():
    pool = torch.npu.MemPool()
    with torch.npu.use_mem_pool(pool):
        inside = filled(4 * MiB, 6)
    outside = filled(4 * MiB, 7)
    assert not segment_of(inside.data_ptr())["is_expandable"]
    assert segment_of(outside.data_ptr())["is_expandable"]
    assert int(inside.cpu().sum()) == 6 * 4 * MiB
    assert_consistent()
    del inside, pool


def test_out_of_memory_names_expandable_segments_and_recovers():
    torch.npu.set_per_process_memory_fraction(0.25, 0)
    total = torch.npu.get_device_properties(0).total_memory
    try:
        kept = filled(8 * MiB, 1)
        with pytest.raises(torch.OutOfMemoryError) as info:
            filled(total // 2, 1)
        assert "growing an expandable segment by" in str(info.value)
        assert "expandable_segments:True" in str(info.value)
        assert torch.npu.memory_allocated() == 8 * MiB
        assert_consistent()
        more = filled(8 * MiB, 2)
        assert int(kept.cpu().sum()) == 8 * MiB and int(more.cpu().sum()) == 16 * MiB
    finally:
        torch.npu.set_per_process_memory_fraction(1.0, 0)


def test_run_with_the_memory_checker(python_subprocess):
    result = python_subprocess(
        """
        import torch, torch_npu
        MiB = 1 << 20
        a = torch.ones(3 * MiB, device="npu")
        b = a.repeat(2) * 2  # kernels on a range spanning several chunks
        print(float(a.cpu().sum() + b.cpu().sum()))
        del b
        torch.npu.empty_cache()
        print(torch.npu.memory_reserved() // MiB, float(a.cpu().sum()))
        """,
        env={"NPU_SIM_CHECKER": "1", "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
             "PYTORCH_ALLOC_CONF": ""},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(float(3 * MiB + 12 * MiB)), "12", str(float(3 * MiB))]


def test_runtime_without_virtual_memory_warns_and_uses_fixed_segments(python_subprocess):
    result = python_subprocess(
        """
        import warnings
        import torch, torch_npu
        t = torch.ones(1 << 20, device="npu")
        seg = torch.npu.memory._snapshot()["segments"]
        print(float(t.sum()), [s["is_expandable"] for s in seg])
        """,
        env={"NPU_SIM_CANN_VERSION": "7.0.0", "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
             "PYTORCH_ALLOC_CONF": ""},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1048576.0", "[False]"]
    assert "expandable_segments:True needs CANN's virtual memory management" in result.stderr
    assert "NPU_SIM_CANN_VERSION=8.0.0" in result.stderr

