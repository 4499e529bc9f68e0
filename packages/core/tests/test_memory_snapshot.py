"""Memory history and snapshots in torch.cuda's format
(torch.npu.memory._record_memory_history, _snapshot, _dump_snapshot,
OOM_SNAPSHOT_ENABLE), memory_summary, MemPool / use_mem_pool and
caching_allocator_alloc/delete."""

from __future__ import annotations

import gc
import os
import pickle

import pytest
import torch

import torch_npu  # noqa: F401

MiB = 1 << 20


@pytest.fixture
def history():
    torch.npu.synchronize()
    torch.npu.memory._record_memory_history(stacks="python")
    try:
        yield
    finally:
        torch.npu.memory._record_memory_history(enabled=None)


def _this_file(frames) -> bool:
    return any(f["filename"].endswith("test_memory_snapshot.py") for f in frames)


def test_history_records_allocations_frees_and_segments_with_python_stacks(history):
    torch.npu.empty_cache()
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="npu")
    address = x.data_ptr()
    del x
    torch.npu.empty_cache()
    trace = torch.npu.memory._snapshot()["device_traces"][torch.npu.current_device()]
    actions = [(e["action"], e["addr"]) for e in trace if e["addr"] == address or e["action"].startswith("segment")]
    assert ("alloc", address) in actions and ("free_completed", address) in actions
    assert any(a == "segment_alloc" for a, _ in actions) and any(a == "segment_free" for a, _ in actions)
    alloc = next(e for e in trace if e["action"] == "alloc" and e["addr"] == address)
    assert alloc["size"] >= 3 * MiB and alloc["stream"] == torch.npu.current_stream().npu_stream
    assert _this_file(alloc["frames"])


def test_snapshot_segments_match_the_allocator(history):
    keep = [torch.empty(n, dtype=torch.uint8, device="npu") for n in (1000, 5 * MiB, 300)]
    snapshot = torch.npu.memory._snapshot()
    device = torch.npu.current_device()
    segments = [s for s in snapshot["segments"] if s["device"] == device]
    assert sum(s["total_size"] for s in segments) == torch.npu.memory_reserved()
    assert sum(s["allocated_size"] for s in segments) == torch.npu.memory_allocated()
    blocks = {b["address"]: b for s in segments for b in s["blocks"]}
    for t in keep:
        block = blocks[t.data_ptr()]
        assert block["state"] == "active_allocated" and block["requested_size"] == t.numel()
        assert _this_file(block["frames"])
    for s in segments:  # blocks tile their segment
        assert s["address"] == s["blocks"][0]["address"]
        assert sum(b["size"] for b in s["blocks"]) == s["total_size"]


def test_pytorchs_memory_viz_reads_the_snapshot(history, tmp_path):
    from torch.cuda import _memory_viz

    x = torch.empty(2 * MiB, dtype=torch.uint8, device="npu")
    del x
    path = tmp_path / "snap.pickle"
    torch.npu.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    assert set(snapshot) >= {"segments", "device_traces"}
    assert "<html" in _memory_viz.trace_plot(snapshot).lower()
    assert "<html" in _memory_viz.segment_plot(snapshot).lower()


def test_history_arguments_are_checked():
    with pytest.raises(ValueError, match="enabled must be"):
        torch.npu.memory._record_memory_history(enabled="yes")
    with pytest.raises(ValueError, match="context must be"):
        torch.npu.memory._record_memory_history(context="stack")
    with pytest.raises(RuntimeError, match="stacks must be"):
        torch.npu.memory._record_memory_history(stacks="cpp")
    torch.npu.memory._record_memory_history(enabled=None)
    x = torch.empty(10, device="npu")  # allocating still works
    assert x.numel() == 10


def test_an_out_of_memory_error_writes_a_snapshot(python_subprocess, tmp_path):
    proc = python_subprocess(
        """
        import torch, torch_npu
        keep = torch.empty(40 << 20, dtype=torch.uint8, device="npu")
        try:
            torch.empty(1 << 30, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError as e:
            print("OOM", "NPU out of memory" in str(e), "max_split_size_mb" in str(e))
        """,
        env={"OOM_SNAPSHOT_ENABLE": "1", "OOM_SNAPSHOT_PATH": str(tmp_path), "NPU_SIM_DEVICE_MEMORY": "128MiB"},
    )
    assert "OOM True True" in proc.stdout, proc.stderr
    files = list(tmp_path.glob("oom_snapshot_*.pickle"))
    assert len(files) == 1 and "memory snapshot written to" in proc.stderr
    with open(files[0], "rb") as f:
        snapshot = pickle.load(f)
    oom = [e for trace in snapshot["device_traces"] for e in trace if e["action"] == "oom"]
    assert oom and oom[0]["size"] == 1 << 30
    assert any(b["requested_size"] == 40 << 20 for s in snapshot["segments"] for b in s["blocks"])


def test_a_bad_oom_snapshot_setting_is_refused(python_subprocess):
    proc = python_subprocess("import torch, torch_npu", env={"OOM_SNAPSHOT_ENABLE": "yes"})
    assert proc.returncode != 0 and "OOM_SNAPSHOT_ENABLE='yes'" in proc.stderr


def test_memory_summary_has_torch_cuda_rows():
    x = torch.empty(MiB, dtype=torch.uint8, device="npu")
    summary = torch.npu.memory_summary()
    for row in ("Allocated memory", "Reserved memory", "from large pool", "Allocations", "OOMs"):
        assert row in summary
    assert "from large pool" not in torch.npu.memory_summary(abbreviated=True)
    del x


def test_a_mem_pool_keeps_its_memory_to_itself():
    torch.npu.synchronize()
    torch.npu.empty_cache()
    pool = torch.npu.MemPool()
    with torch.npu.use_mem_pool(pool):
        a = torch.empty(4 * MiB, dtype=torch.uint8, device="npu")
    address = a.data_ptr()
    assert [s["segment_pool_id"] for s in pool.snapshot()] == [pool.id]
    del a  # freed into the pool, not reused outside it
    b = torch.empty(4 * MiB, dtype=torch.uint8, device="npu")
    assert b.data_ptr() != address
    with torch.npu.use_mem_pool(pool):
        c = torch.empty(4 * MiB, dtype=torch.uint8, device="npu")
    assert c.data_ptr() == address
    del c
    reserved = torch.npu.memory_reserved()
    del pool
    gc.collect()
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() <= reserved - 4 * MiB
    del b


def test_use_mem_pool_checks_the_device():
    if torch.npu.device_count() < 2:
        pytest.skip("needs two simulated devices")
    pool = torch.npu.MemPool(device=1)
    with pytest.raises(ValueError, match="belongs to npu:1"):
        with torch.npu.use_mem_pool(pool, device=0):
            pass


def test_caching_allocator_alloc_and_delete():
    before = torch.npu.memory_allocated()
    ptr = torch.npu.caching_allocator_alloc(MiB)
    assert ptr != 0 and torch.npu.memory_allocated() == before + MiB
    torch.npu.caching_allocator_delete(ptr)
    assert torch.npu.memory_allocated() == before
    with pytest.raises(ValueError, match="non-negative int"):
        torch.npu.caching_allocator_alloc(-1)
    with pytest.raises(RuntimeError, match="invalid device pointer"):
        torch.npu.caching_allocator_delete(12345)
    assert torch.npu.memory_allocated() == before
    assert os.environ.get("OOM_SNAPSHOT_ENABLE", "0") == "0"
