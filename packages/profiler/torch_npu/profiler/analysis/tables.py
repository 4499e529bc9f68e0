"""The CSV files of ASCEND_PROFILER_OUTPUT, with Ascend's column names.

Each function returns (header, rows). Which columns appear depends on the
collection's options, as on CANN: Level1/Level2 add the kernels' launch
details, record_shapes the input shapes, with_stack the call stacks.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable

from .model import DeviceItem, HostOp, MemoryEvent, RunModel

Table = tuple[list[str], list[list[object]]]

_MB = 1024 * 1024


def _us(ns: int) -> str:
    return f"{ns / 1000:.3f}"


def _mb(nbytes: int) -> str:
    return f"{nbytes / _MB:.6f}"


def _shapes(value: object) -> str:
    if not value:
        return ""
    return ";".join(",".join(str(d) for d in shape) if isinstance(shape, list) else str(shape) for shape in value)


def _types(value: object) -> str:
    return ";".join(str(t) for t in value) if value else ""


def kernel_details(model: RunModel) -> Table:
    with_steps = bool(model.steps)
    detailed = model.config.detailed
    header = (["Step Id"] if with_steps else []) + ["Device_id", "Name", "Type"]
    if detailed:
        header += ["Task ID", "Stream ID"]
    header += ["Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Num"]
    if detailed:
        header += ["Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
                   "Output Formats"]
    rows = []
    previous_end: dict[tuple[int, int], int] = {}
    for item in model.device_items:
        lane = (item.device, item.stream_id)
        wait = max(0, item.start_ns - previous_end[lane]) if lane in previous_end else 0
        previous_end[lane] = item.end_ns
        row: list[object] = [item.step if item.step is not None else ""] if with_steps else []
        row += [item.device, item.name, item.op_type]
        if detailed:
            row += [item.work_id, item.stream_id]
        row += [item.accelerator_core, _us(item.start_ns), _us(item.dur_ns), _us(wait), 0]
        if detailed:
            args = item.op.args if item.op is not None and model.common_config.get("record_shapes") else {}
            shapes = args.get("Input Dims")
            row += [_shapes(shapes) if shapes else "N/A", _types(args.get("Input type")) or "N/A",
                    "ND" if shapes else "N/A", "N/A", "N/A", "N/A"]
        rows.append(row)
    return header, rows


def _device_totals(op: HostOp, core_only: bool) -> tuple[int, int]:
    """Device time of the items an op launched itself, and with its descendants'."""
    own = sum(i.dur_ns for i in op.device_items if not core_only or i.accelerator_core == "AI_CORE")
    total = own + sum(_device_totals(child, core_only)[1] for child in op.children)
    return own, total


def operator_details(model: RunModel) -> Table:
    record_shapes = bool(model.common_config.get("record_shapes"))
    with_stack = bool(model.common_config.get("with_stack") or model.common_config.get("with_modules"))
    # Ascend writes all nine columns whatever was recorded, leaving Input
    # Shapes and Call Stack empty when record_shapes/with_stack were off:
    # readers index the columns by position (TensorBoard's profiler plugin
    # skips every row of a shorter table, leaving its Operator view empty).
    header = ["Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
              "Device Self Duration(us)", "Device Total Duration(us)", "Device Self Duration With AICore(us)",
              "Device Total Duration With AICore(us)"]
    rows = []
    for op in model.host_ops:
        if op.category != "cpu_op":
            continue
        host_self = op.dur_ns - sum(child.dur_ns for child in op.children)
        device_self, device_total = _device_totals(op, core_only=False)
        core_self, core_total = _device_totals(op, core_only=True)
        row: list[object] = [op.name, _shapes(op.args.get("Input Dims")) if record_shapes else "",
                             ";".join(op.call_stack) if with_stack else ""]
        row += [_us(max(0, host_self)), _us(op.dur_ns), _us(device_self), _us(device_total), _us(core_self),
                _us(core_total)]
        rows.append(row)
    return header, rows


def op_statistic(model: RunModel) -> Table:
    header = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
              "Max Time(us)", "Ratio(%)"]
    groups: dict[tuple[int, str, str], list[int]] = defaultdict(list)
    device_total: dict[int, int] = defaultdict(int)
    for item in model.device_items:
        groups[(item.device, item.op_type, item.accelerator_core)].append(item.dur_ns)
        device_total[item.device] += item.dur_ns
    rows = []
    for (device, op_type, core), durations in groups.items():
        total = sum(durations)
        ratio = 100.0 * total / device_total[device] if device_total[device] else 0.0
        rows.append([device, op_type, core, len(durations), _us(total), _us(min(durations)),
                     _us(total // len(durations)), _us(max(durations)), f"{ratio:.2f}"])
    rows.sort(key=lambda r: (r[0], -float(r[4]), r[1]))
    return header, rows


def _union(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _length(intervals: list[tuple[int, int]]) -> int:
    return sum(end - start for start, end in intervals)


def _intersection(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    i = j = total = 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def step_trace_time(model: RunModel) -> Table:
    """Per device and step (all times in us): Computing (device busy with
    computation), Communication (busy with collectives), Overlapped (both at
    once), Communication(Not Overlapped) = Communication - Overlapped, Free
    (the step's span with the device idle), Stage and Bubble (pipeline
    parallelism: 0 here), the not-overlapped communication without receives,
    and Preparing (from the step's start to its first device item)."""
    header = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication",
              "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
    by_key: dict[tuple[int, int | None], list[DeviceItem]] = defaultdict(list)
    for item in model.device_items:
        if model.steps and item.step is None:
            continue
        by_key[(item.device, item.step)].append(item)
    step_spans = {s.number: (s.start_ns, s.end_ns) for s in model.steps}
    rows = []
    for (device, step), items in sorted(by_key.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        compute = _union((i.start_ns, i.end_ns) for i in items if not i.is_communication)
        comm = _union((i.start_ns, i.end_ns) for i in items if i.is_communication)
        comm_no_recv = _union((i.start_ns, i.end_ns) for i in items if i.is_communication and not i.is_receive)
        busy = _union(compute + comm)
        first = min(i.start_ns for i in items)
        last = max(i.end_ns for i in items)
        span_start, span_end = step_spans.get(step, (first, last)) if step is not None else (first, last)
        span_end = max(span_end, last)
        span_start = min(span_start, first)
        overlapped = _intersection(compute, comm)
        comm_len = _length(comm)
        rows.append([device, step if step is not None else "", _us(_length(compute)), _us(comm_len - overlapped),
                     _us(overlapped), _us(comm_len), _us(max(0, span_end - span_start - _length(busy))), _us(0),
                     _us(0), _us(_length(comm_no_recv) - _intersection(compute, comm_no_recv)),
                     _us(max(0, first - span_start))])
    return header, rows


def memory_record(model: RunModel) -> Table:
    """The caching allocator's totals after each allocation and free (MB).
    Total Active is the allocated total: the allocator's reports carry no
    separate active figure."""
    header = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)",
              "Stream Ptr", "Device Type"]
    rows = [["PTA", _us(m.ts_ns), _mb(m.total_allocated), _mb(m.total_reserved), _mb(m.total_allocated), "N/A",
             f"NPU:{m.device}"] for m in model.memory]
    return header, rows


def _innermost_op(ops_by_thread: dict[int, tuple[list[int], list[HostOp]]], event: MemoryEvent) -> HostOp | None:
    """The innermost torch op running on the event's thread at its time: the
    last op started before it, or the nearest of that op's ancestors that
    had not ended yet."""
    starts, ops = ops_by_thread.get(event.tid, ([], []))
    index = bisect.bisect_right(starts, event.ts_ns) - 1
    op = ops[index] if index >= 0 else None
    while op is not None and (op.end_ns < event.ts_ns or op.category != "cpu_op"):
        op = op.parent
    return op


def operator_memory(model: RunModel) -> Table:
    """One row per allocation made during the collection: the op that made it
    (innermost on its thread), its size and lifetime, and the allocator's
    totals at allocation and at release (empty when not released in the
    window)."""
    header = ["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
              "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
              "Allocation Total Reserved(MB)", "Allocation Total Active(MB)", "Release Total Allocated(MB)",
              "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr", "Device Type"]
    grouped: dict[int, list[HostOp]] = defaultdict(list)
    for op in model.host_ops:  # sorted by thread and start
        grouped[op.tid].append(op)
    ops_by_thread = {tid: ([op.start_ns for op in ops], ops) for tid, ops in grouped.items()}
    live: dict[tuple[int, int], MemoryEvent] = {}
    pairs: list[tuple[MemoryEvent, MemoryEvent | None]] = []
    for event in model.memory:
        key = (event.device, event.addr)
        if event.bytes > 0:
            live[key] = event
            pairs.append((event, None))
        elif key in live:
            allocation = live.pop(key)
            for index in range(len(pairs) - 1, -1, -1):
                if pairs[index][0] is allocation:
                    pairs[index] = (allocation, event)
                    break
    rows = []
    for allocation, release in pairs:
        op = _innermost_op(ops_by_thread, allocation)
        release_cells = (["", "", "", "", "", "", ""] if release is None else
                         [_us(release.ts_ns), _us(release.ts_ns), _us(release.ts_ns - allocation.ts_ns),
                          _us(release.ts_ns - allocation.ts_ns)] + [None] * 3)
        if release is not None:
            release_cells[4:7] = [_mb(release.total_allocated), _mb(release.total_reserved),
                                  _mb(release.total_allocated)]
        rows.append([op.name if op is not None else "unknown", f"{allocation.bytes / 1024:.3f}",
                     _us(allocation.ts_ns), *release_cells[:4], _mb(allocation.total_allocated),
                     _mb(allocation.total_reserved), _mb(allocation.total_allocated), *release_cells[4:7], "N/A",
                     f"NPU:{allocation.device}"])
    return header, rows
