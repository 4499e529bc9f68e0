"""Pairing core's host ops with torch's op events (analysis/model.py _link):
same thread and name, aligned by rank, robust to a late callback and to
extra calls at the ends of core's record."""

from __future__ import annotations

from torch_npu.profiler.analysis.model import HostOp, _link


def torch_op(name: str, start: int, tid: int = 7) -> HostOp:
    return HostOp(name=name, category="cpu_op", tid=tid, start_ns=start, end_ns=start + 100, args={})


def core_op(name: str, start: int, correlation_id: int, tid: int = 7) -> dict:
    return {"name": name, "start_ns": start, "end_ns": start + 100, "os_thread_id": tid,
            "correlation_id": correlation_id, "thread_id": 1}


def test_calls_pair_by_rank_despite_a_late_callback_and_extra_calls():
    offset = 300  # what is left of the clocks' offset
    torch_ops = [torch_op("aten::add", offset + t) for t in (1_000, 2_000, 3_000, 4_000)]
    core = [core_op("aten::add", 500, 1),  # before torch's profiler started
            core_op("aten::add", 1_000, 2), core_op("aten::add", 2_000, 3),
            core_op("aten::add", 3_000 + 900, 4),  # preempted: nearer to the next call than to its own
            core_op("aten::add", 4_000, 5)]
    linked = _link(torch_ops, core)
    assert linked == {2: torch_ops[0], 3: torch_ops[1], 4: torch_ops[2], 5: torch_ops[3]}


def test_threads_and_names_are_kept_apart():
    torch_ops = [torch_op("aten::mul", 100, tid=1), torch_op("aten::mul", 100, tid=2), torch_op("aten::add", 100)]
    core = [core_op("aten::mul", 100, 1, tid=2), core_op("aten::mul", 100, 2, tid=1), core_op("aten::sub", 100, 3)]
    linked = _link(torch_ops, core)
    assert linked == {1: torch_ops[1], 2: torch_ops[0]}
