"""trace_view.json: the Chrome/Perfetto trace of a collection, laid out as
Ascend's: a bare JSON array; host ops per thread under the "Python" process;
device work per stream under one "Ascend Hardware" process per device;
collectives also under an "HCCL" process per device (lane "Communication"); a flow
arrow from each host op to every item it launched; mstx marks and ranges."""

from __future__ import annotations

from typing import Any

from .model import DeviceItem, HostOp, RunModel

FLOW_NAME = "torch_to_npu"
FLOW_CATEGORY = "async_npu"


def us(ns: int) -> float:
    """Trace timestamps: microseconds, nanosecond resolution."""
    return round(ns / 1000, 3)


def device_pid(model: RunModel, device: int) -> int:
    """The process lane of a device: derived from the host pid so that ranks'
    traces can be merged without clashes."""
    return model.pid * 1000 + 100 + device


def hccl_pid(model: RunModel, device: int) -> int:
    """The process lane of a device's collectives ("HCCL", as Ascend shows
    communication apart from the hardware streams)."""
    return model.pid * 1000 + 200 + device


def _metadata(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def host_op_args(model: RunModel, op: HostOp) -> dict[str, Any]:
    args: dict[str, Any] = {"Sequence number": op.args.get("Sequence number", -1),
                            "Fwd thread id": op.args.get("Fwd thread id", 0)}
    common = model.common_config
    if common.get("record_shapes") and "Input Dims" in op.args:
        args["Input Dims"] = op.args["Input Dims"]
        args["Input type"] = op.args.get("Input type", [])
    if (common.get("with_stack") or common.get("with_modules")) and op.call_stack:
        args["Call stack"] = ";\r\n".join(op.call_stack)
    if common.get("with_flops") and "flops" in op.args:
        args["flops"] = op.args["flops"]
    return args


def device_item_args(model: RunModel, item: DeviceItem) -> dict[str, Any]:
    args: dict[str, Any] = {"Task Type": item.accelerator_core, "Stream Id": item.stream_id,
                            "Device Id": item.device, "correlation_id": item.correlation_id}
    if model.config.detailed:
        args["Task Id"] = item.work_id
        args["Stream Handle"] = hex(item.stream_handle)
    if item.kind in ("memcpy", "memset"):
        args["Bytes"] = item.bytes
    return args


def build_trace_view(model: RunModel) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    pid = model.pid
    threads = sorted({op.tid for op in model.host_ops} | {m.tid for m in model.mstx})
    if model.has_cpu or model.mstx:
        events.append(_metadata("process_name", pid, 0, {"name": "Python"}))
        events.append(_metadata("process_labels", pid, 0, {"labels": "CPU"}))
        events.append(_metadata("process_sort_index", pid, 0, {"sort_index": 0}))
        for tid in threads:
            events.append(_metadata("thread_name", pid, tid, {"name": f"Thread {tid}"}))
            events.append(_metadata("thread_sort_index", pid, tid, {"sort_index": tid}))
    lanes = sorted(model.stream_handles.items(), key=lambda kv: (kv[0][0], kv[1]))
    for device in sorted({device for (device, _), _ in lanes}):
        lane_pid = device_pid(model, device)
        events.append(_metadata("process_name", lane_pid, 0, {"name": "Ascend Hardware"}))
        events.append(_metadata("process_labels", lane_pid, 0, {"labels": f"NPU {device}"}))
        events.append(_metadata("process_sort_index", lane_pid, 0, {"sort_index": 100 + device}))
    for (device, handle), stream_id in lanes:
        lane_pid = device_pid(model, device)
        events.append(_metadata("thread_name", lane_pid, stream_id, {"name": f"Stream {stream_id}"}))
        events.append(_metadata("thread_sort_index", lane_pid, stream_id, {"sort_index": stream_id}))
    for device in sorted({item.device for item in model.device_items if item.is_communication}):
        lane_pid = hccl_pid(model, device)
        events.append(_metadata("process_name", lane_pid, 0, {"name": "HCCL"}))
        events.append(_metadata("process_labels", lane_pid, 0, {"labels": f"NPU {device}"}))
        events.append(_metadata("process_sort_index", lane_pid, 0, {"sort_index": 200 + device}))
        events.append(_metadata("thread_name", lane_pid, 0, {"name": "Communication"}))
    if model.has_cpu:
        for op in model.host_ops:
            events.append({"ph": "X", "cat": op.category, "name": op.name, "pid": pid, "tid": op.tid,
                           "ts": us(op.start_ns), "dur": us(op.dur_ns), "args": host_op_args(model, op)})
    flow_id = 0
    for item in model.device_items:
        lane_pid = device_pid(model, item.device)
        events.append({"ph": "X", "cat": item.kind, "name": item.name, "pid": lane_pid, "tid": item.stream_id,
                       "ts": us(item.start_ns), "dur": us(item.dur_ns), "args": device_item_args(model, item)})
        if item.is_communication:
            events.append({"ph": "X", "cat": "HCCL", "name": item.name, "pid": hccl_pid(model, item.device),
                           "tid": 0, "ts": us(item.start_ns), "dur": us(item.dur_ns),
                           "args": {"Task Type": "HCCL", "Stream Id": item.stream_id, "Device Id": item.device,
                                    "correlation_id": item.correlation_id}})
        if model.has_cpu and item.op is not None:
            flow_id += 1
            events.append({"ph": "s", "cat": FLOW_CATEGORY, "name": FLOW_NAME, "id": flow_id, "pid": pid,
                           "tid": item.op.tid, "ts": us(item.op.start_ns)})
            events.append({"ph": "f", "bp": "e", "cat": FLOW_CATEGORY, "name": FLOW_NAME, "id": flow_id,
                           "pid": lane_pid, "tid": item.stream_id, "ts": us(item.start_ns)})
    for record in model.mstx:
        args = {"domain": record.domain}
        if record.is_mark:
            events.append({"ph": "i", "s": "t", "cat": "mstx", "name": record.name, "pid": pid, "tid": record.tid,
                           "ts": us(record.start_ns), "args": args})
        else:
            events.append({"ph": "X", "cat": "mstx", "name": record.name, "pid": pid, "tid": record.tid,
                           "ts": us(record.start_ns), "dur": us(record.end_ns - record.start_ns), "args": args})
        if record.stream_id is not None:
            lane_pid = device_pid(model, record.device)
            if record.is_mark:
                events.append({"ph": "i", "s": "t", "cat": "mstx", "name": record.name, "pid": lane_pid,
                               "tid": record.stream_id, "ts": us(record.start_ns), "args": args})
            else:
                events.append({"ph": "X", "cat": "mstx", "name": record.name, "pid": lane_pid,
                               "tid": record.stream_id, "ts": us(record.start_ns),
                               "dur": us(record.end_ns - record.start_ns), "args": args})
    return events
