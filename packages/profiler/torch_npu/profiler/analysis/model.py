"""The profile of one collection as linked objects: host ops (from torch's
trace, linked to core's host ops), device items attributed to the op that
launched them, steps, memory events and mstx records.

Times are nanoseconds on CLOCK_REALTIME (what trace viewers show as wall
time); device records and core's host ops are on CLOCK_MONOTONIC and are moved
by the offset profiler_info.json records.
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..experimental_config import _ExperimentalConfig
from ..raw_data import RawRun

# c10::DeviceType::PrivateUse1: the allocator's memory events of npu tensors.
_PRIVATEUSE1 = 20
_STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass(eq=False)
class HostOp:
    name: str
    category: str  # "cpu_op" or "user_annotation"
    tid: int  # OS thread id
    start_ns: int
    end_ns: int
    args: dict[str, Any]
    parent: HostOp | None = None
    children: list[HostOp] = field(default_factory=list)
    device_items: list[DeviceItem] = field(default_factory=list)  # launched by this op itself
    call_stack: list[str] = field(default_factory=list)  # innermost frame first
    step: int | None = None

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(eq=False)
class DeviceItem:
    name: str
    kind: str  # "kernel", "memcpy", "memset"
    device: int
    stream_id: int  # lanes numbered per device in order of first use
    stream_handle: int
    work_id: int
    correlation_id: int
    start_ns: int
    end_ns: int
    bytes: int
    op: HostOp | None = None
    step: int | None = None
    # Collectives (the simulator's records): the communicator's rank count
    # (0: unknown or not a collective), this rank, and the point-to-point
    # peer (-1: none).
    rank_count: int = 0
    rank: int = 0
    peer_rank: int = -1
    # Collectives: of the item's time, how long this rank waited for its peers
    # in all, and before any data moved (core's Note [Collective wait times]).
    wait_ns: int = 0
    sync_ns: int = 0

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def is_communication(self) -> bool:
        # The simulator's HCCL names its device work after the API (HcclAllReduce).
        return self.name.startswith(("Hccl", "hccl:"))

    @property
    def is_receive(self) -> bool:
        return self.is_communication and "recv" in self.name.lower()

    @property
    def op_type(self) -> str:
        if self.kind == "memcpy":
            return "MEMCPY_ASYNC"
        if self.kind == "memset":
            return "MEMSET"
        return self.name

    @property
    def accelerator_core(self) -> str:
        if self.kind in ("memcpy", "memset"):
            return "SDMA"
        return "HCCL" if self.is_communication else "AI_CORE"


@dataclass
class Step:
    number: int
    start_ns: int
    end_ns: int


@dataclass
class MemoryEvent:
    ts_ns: int
    tid: int
    bytes: int
    total_allocated: int
    total_reserved: int
    device: int
    addr: int


@dataclass
class MstxRecord:
    name: str
    domain: str
    start_ns: int
    end_ns: int
    stream_handle: int
    stream_id: int | None
    device: int
    tid: int

    @property
    def is_mark(self) -> bool:
        return self.end_ns == self.start_ns


@dataclass
class RunModel:
    info: dict[str, Any]
    metadata: dict[str, Any]
    config: _ExperimentalConfig
    common_config: dict[str, Any]
    pid: int
    host_ops: list[HostOp]
    device_items: list[DeviceItem]
    steps: list[Step]
    memory: list[MemoryEvent]
    mstx: list[MstxRecord]
    stream_handles: dict[tuple[int, int], int]  # (device, handle) -> stream id

    @property
    def has_cpu(self) -> bool:
        return "ProfilerActivity.CPU" in self.common_config.get("activities", [])

    @property
    def has_npu(self) -> bool:
        return "ProfilerActivity.NPU" in self.common_config.get("activities", []) and self.config.collects_device


def build_model(run: RawRun) -> RunModel:
    info = run.info
    offset_ns = int(info["start_info"]["realtime_minus_monotonic_ns"])
    common = info["config"]["common_config"]
    config = _ExperimentalConfig.from_dict(info["config"]["experimental_config"])
    ops, python_frames, memory = _torch_trace_events(run.torch_trace)
    if common.get("with_stack") or common.get("with_modules"):
        _attach_call_stacks(ops, python_frames)
    _nest(ops)
    if info["start_info"].get("correlation") == "kineto":
        # Note [Kineto correlation for torch_npu.profiler]: torch's op events
        # carry the ids themselves; they stand in for core's host ops.
        core_ops = [{"name": op.name, "correlation_id": op.args["External id"], "os_thread_id": op.tid,
                     "start_ns": op.start_ns, "end_ns": op.end_ns} for op in ops if op.args.get("External id")]
        op_of_correlation = {op.args["External id"]: op for op in ops if op.args.get("External id")}
    else:
        core_ops = [dict(op, start_ns=op["start_ns"] + offset_ns, end_ns=op["end_ns"] + offset_ns)
                    for op in run.host_ops]
        op_of_correlation = _link(ops, core_ops)
    steps = _steps(core_ops) or _steps(
        [{"name": op.name, "start_ns": op.start_ns, "end_ns": op.end_ns} for op in ops])
    stream_handles: dict[tuple[int, int], int] = {}
    known_correlations = {op["correlation_id"] for op in core_ops}
    items: list[DeviceItem] = []
    mstx: list[MstxRecord] = []
    threads = {op["os_thread_id"] for op in core_ops}
    threads.add(info["start_info"].get("thread"))
    for record in sorted(run.device_records, key=lambda r: (r.get("start_ns", 0), r.get("end_ns", 0))):
        kind = record.get("kind")
        if kind in ("kernel", "memcpy", "memset"):
            # Work launched by threads outside this collection (another
            # thread's ops) is not this profile's.
            if record["correlation_id"] not in known_correlations:
                continue
            stream_id = _stream_id(stream_handles, record["device"], record["stream"])
            item = DeviceItem(
                name=record["name"], kind=kind, device=record["device"], stream_id=stream_id,
                stream_handle=record["stream"], work_id=record["work_id"],
                correlation_id=record["correlation_id"], start_ns=record["start_ns"] + offset_ns,
                end_ns=record["end_ns"] + offset_ns, bytes=record["bytes"],
                rank_count=record.get("rank_count", 0), rank=record.get("rank", 0),
                peer_rank=record.get("peer_rank", -1), wait_ns=record.get("wait_ns", 0),
                sync_ns=record.get("sync_ns", 0))
            item.op = op_of_correlation.get(item.correlation_id)
            if item.op is not None:
                item.op.device_items.append(item)
            items.append(item)
        elif kind == "mstx":
            # Shown when asked for (mstx / msprof_tx), from the profiled
            # threads, in the domains the config lets through.
            if not (config.mstx or config.msprof_tx) or record.get("tid") not in threads:
                continue
            if not config.mstx_domain_shown(record.get("domain", "default")):
                continue
            stream = record.get("stream", 0)
            mstx.append(MstxRecord(
                name=record.get("name", ""), domain=record.get("domain", "default"),
                start_ns=record["start_ns"] + offset_ns, end_ns=record["end_ns"] + offset_ns,
                stream_handle=stream,
                stream_id=_stream_id(stream_handles, record.get("device", 0), stream) if stream else None,
                device=record.get("device", 0), tid=record["tid"]))
        # Other kinds: records this version does not know; ignored.
    core_by_correlation = {op["correlation_id"]: op for op in core_ops}
    for item in items:
        launcher = core_by_correlation.get(item.correlation_id)
        item.step = _step_of(steps, launcher["start_ns"] if launcher else item.start_ns)
    for op in ops:
        op.step = _step_of(steps, op.start_ns)
    return RunModel(info=info, metadata=run.metadata, config=config, common_config=common,
                    pid=int(info.get("pid", 0)), host_ops=ops, device_items=items, steps=steps, memory=memory,
                    mstx=mstx, stream_handles=stream_handles)


def _stream_id(stream_handles: dict[tuple[int, int], int], device: int, handle: int) -> int:
    key = (device, handle)
    if key not in stream_handles:
        stream_handles[key] = sum(1 for d, _ in stream_handles if d == device)
    return stream_handles[key]


def _torch_trace_events(trace: dict[str, Any] | None):
    """Host ops, python frames and npu memory events of torch's trace."""
    ops: list[HostOp] = []
    frames: list[tuple[int, int, int, str]] = []
    memory: list[MemoryEvent] = []
    if trace is None:
        return ops, frames, memory
    base_ns = int(trace.get("baseTimeNanoseconds", 0))

    def ns(ts_us: float) -> int:
        return base_ns + round(ts_us * 1000)

    for event in trace.get("traceEvents", []):
        category, phase = event.get("cat"), event.get("ph")
        if phase == "X" and category in ("cpu_op", "user_annotation"):
            start = ns(event["ts"])
            ops.append(HostOp(name=event["name"], category=category, tid=int(event["tid"]), start_ns=start,
                              end_ns=start + round(event.get("dur", 0) * 1000), args=event.get("args", {})))
        elif phase == "X" and category == "python_function":
            start = ns(event["ts"])
            frames.append((int(event["tid"]), start, start + round(event.get("dur", 0) * 1000), event["name"]))
        elif event.get("name") == "[memory]":
            args = event.get("args", {})
            if args.get("Device Type") != _PRIVATEUSE1:
                continue
            memory.append(MemoryEvent(
                ts_ns=ns(event["ts"]), tid=int(event["tid"]), bytes=int(args.get("Bytes", 0)),
                total_allocated=int(args.get("Total Allocated", 0)),
                total_reserved=int(args.get("Total Reserved", 0)), device=int(args.get("Device Id", 0)),
                addr=int(args.get("Addr", 0))))
    ops.sort(key=lambda op: (op.tid, op.start_ns, -op.end_ns))
    memory.sort(key=lambda m: m.ts_ns)
    return ops, frames, memory


def _nest(ops: list[HostOp]) -> None:
    """Parent and children of each op on its thread (ops sorted by thread,
    start, longest first)."""
    open_ops: list[HostOp] = []
    tid = None
    for op in ops:
        if op.tid != tid:
            open_ops, tid = [], op.tid
        while open_ops and open_ops[-1].end_ns <= op.start_ns:
            open_ops.pop()
        if open_ops and op.end_ns <= open_ops[-1].end_ns:
            op.parent = open_ops[-1]
            op.parent.children.append(op)
        open_ops.append(op)


def _attach_call_stacks(ops: list[HostOp], frames: list[tuple[int, int, int, str]]) -> None:
    """Each op's python stack: the python frames open on its thread at its start."""
    by_thread: dict[int, list[tuple[int, int, int, str]]] = defaultdict(list)
    for frame in frames:
        by_thread[frame[0]].append(frame)
    for tid, thread_frames in by_thread.items():
        thread_frames.sort(key=lambda f: (f[1], -f[2]))
    ops_by_thread: dict[int, list[HostOp]] = defaultdict(list)
    for op in ops:
        ops_by_thread[op.tid].append(op)
    for tid, thread_ops in ops_by_thread.items():
        thread_frames = by_thread.get(tid, [])
        stack: list[tuple[int, int, int, str]] = []
        i = 0
        for op in sorted(thread_ops, key=lambda o: o.start_ns):
            while i < len(thread_frames) and thread_frames[i][1] <= op.start_ns:
                while stack and stack[-1][2] < thread_frames[i][1]:
                    stack.pop()
                stack.append(thread_frames[i])
                i += 1
            while stack and stack[-1][2] < op.start_ns:
                stack.pop()
            op.call_stack = [f[3] for f in reversed(stack) if f[2] >= op.end_ns]


def _link(ops: list[HostOp], core_ops: list[dict[str, Any]]) -> dict[int, HostOp]:
    """Correlation id -> torch's op: the same call seen by torch's profiler and
    by core's callback.

    Both record, per thread and op name, the same calls in the same order
    (core's callback is registered before torch's profiler starts and removed
    after it stops, so it may hold a few more calls at either end). Within
    each (thread, name) group the two sequences are therefore aligned by one
    index shift: the shift most of torch's ops agree on, each op voting for the
    core call nearest to it in time. Rank order, not time alone, decides, so
    a preempted callback (times apart by more than the gap between two calls)
    still pairs the right calls."""
    core_groups: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for core in core_ops:
        core_groups[(core["os_thread_id"], core["name"])].append(core)
    torch_groups: dict[tuple[int, str], list[HostOp]] = defaultdict(list)
    for op in ops:
        torch_groups[(op.tid, op.name)].append(op)
    for group in core_groups.values():
        group.sort(key=lambda c: c["start_ns"])
    for group in torch_groups.values():
        group.sort(key=lambda op: op.start_ns)

    def nearest(starts: list[int], t: int) -> int:
        i = bisect.bisect_left(starts, t)
        return min((j for j in (i - 1, i) if 0 <= j < len(starts)), key=lambda j: abs(starts[j] - t))

    # What is left of the two clocks' offset after profiler_info's offset was
    # applied (torch converts its own clock): the median difference of each
    # torch op to its nearest core call.
    differences = []
    for key, torch_group in torch_groups.items():
        if key in core_groups:
            starts = [c["start_ns"] for c in core_groups[key]]
            differences += [op.start_ns - starts[nearest(starts, op.start_ns)] for op in torch_group]
    offset = int(statistics.median(differences)) if differences else 0
    linked: dict[int, HostOp] = {}
    for key, torch_group in torch_groups.items():
        core_group = core_groups.get(key)
        if not core_group:
            continue
        starts = [c["start_ns"] + offset for c in core_group]
        votes: dict[int, int] = defaultdict(int)
        for index, op in enumerate(torch_group):
            votes[nearest(starts, op.start_ns) - index] += 1
        shift = max(votes.items(), key=lambda kv: (kv[1], -abs(kv[0])))[0]
        for index, op in enumerate(torch_group):
            if 0 <= index + shift < len(core_group):
                linked[core_group[index + shift]["correlation_id"]] = op
    return linked


def _steps(core_ops: list[dict[str, Any]]) -> list[Step]:
    steps = []
    for op in core_ops:
        match = _STEP_NAME.match(op["name"])
        if match:
            steps.append(Step(int(match.group(1)), op["start_ns"], op["end_ns"]))
    steps.sort(key=lambda s: s.start_ns)
    return steps


def _step_of(steps: list[Step], t: int) -> int | None:
    for step in steps:
        if step.start_ns <= t < step.end_ns:
            return step.number
    return None
