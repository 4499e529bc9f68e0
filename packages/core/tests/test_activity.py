"""Note [Device activity records] (csrc/npu/NPUActivity.h): the runtime
records every executed item while recording is on, with its stream, device,
times, bytes and the launching thread's correlation id, and nothing while
off; the caching allocator reports to PyTorch's profiler."""

from __future__ import annotations

import threading

import pytest
import torch

import torch_npu

C = torch_npu._C


def test_the_simulator_records_activity():
    assert C._activity_is_available()


def test_copies_memsets_and_kernels_leave_records(activity_recording):
    host = torch.arange(1024, dtype=torch.float32)
    C._activity_push_correlation_id(41)
    x = host.npu()  # memcpy
    C._activity_push_correlation_id(42)
    x.zero_()  # memset (core's dense zero_)
    y = x.t() if x.dim() > 1 else x[::2].contiguous()  # core's strided copy kernel
    assert C._activity_pop_correlation_id() == 42
    assert C._activity_pop_correlation_id() == 41
    torch.npu.synchronize()
    records = C._activity_flush()
    by_kind = {kind: [r for r in records if r["kind"] == kind] for kind in ("memcpy", "memset", "kernel")}
    copy = next(r for r in by_kind["memcpy"] if r["bytes"] == host.nbytes)
    assert copy["correlation_id"] == 41 and copy["work_id"] == 0
    memset = next(r for r in by_kind["memset"] if r["bytes"] == host.nbytes)
    assert memset["correlation_id"] == 42
    kernel = next(r for r in by_kind["kernel"] if r["name"] == "aten::copy_")
    assert kernel["correlation_id"] == 42 and kernel["work_id"] > 0 and kernel["bytes"] == 0
    # Not collectives (those are test_sim_hccl.py's, Note [Collective activity records]).
    assert all((r["rank_count"], r["rank"], r["peer_rank"]) == (0, 0, -1) for r in (copy, memset, kernel))
    stream = torch.npu.current_stream()
    for record in (copy, memset, kernel):
        assert record["device"] == stream.device.index
        assert record["stream"] == stream.npu_stream
        assert 0 < record["start_ns"] <= record["end_ns"]
    assert copy["end_ns"] <= memset["start_ns"] and memset["end_ns"] <= kernel["start_ns"]  # stream order
    assert y.numel() == 512
    assert C._activity_flush() == []  # taken


def test_records_name_the_stream_and_device_the_work_ran_on(activity_recording):
    if torch.npu.device_count() < 2:
        pytest.skip("needs two simulated devices")
    side = torch.npu.Stream(device=1)
    with torch.npu.device(1), torch.npu.stream(side):
        torch.ones(64, device="npu:1").zero_()
    torch.npu.synchronize(1)
    records = [r for r in C._activity_flush() if r["kind"] == "memset"]
    assert any(r["device"] == 1 and r["stream"] == side.npu_stream for r in records)


def test_correlation_ids_are_per_thread(activity_recording):
    C._activity_push_correlation_id(7)
    seen = []

    def other_thread():
        torch.npu.set_device(0)
        torch.ones(16, device="npu").zero_()
        torch.npu.synchronize()
        seen.append("done")

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert C._activity_pop_correlation_id() == 7
    assert seen == ["done"]
    memsets = [r for r in C._activity_flush() if r["kind"] == "memset" and r["bytes"] == 64]
    assert memsets and all(r["correlation_id"] == 0 for r in memsets)
    with pytest.raises(RuntimeError, match="pushed no correlation id"):
        C._activity_pop_correlation_id()


def test_nothing_is_recorded_while_off():
    torch.npu.synchronize()
    C._activity_flush()
    x = torch.ones(256, device="npu")
    x.zero_()
    torch.npu.synchronize()
    assert C._activity_flush() == []


def test_the_allocator_reports_to_pytorchs_profiler():
    torch.npu.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        x = torch.empty(1 << 20, dtype=torch.uint8, device="npu")
        del x
    # The profiler's raw events: one [memory] event per allocation and free.
    reports = [e.nbytes() for e in prof.profiler.kineto_results.events()
               if e.name() == "[memory]" and e.device_type() != torch.autograd.DeviceType.CPU]
    assert reports == [1 << 20, -(1 << 20)]
