"""communication.json: per step, per collective, its time and bandwidth, in
the layout Ascend documents for a rank's ASCEND_PROFILER_OUTPUT.

    {"step3": {"collective": {"hcom_allReduce__0": {"Communication Time Info": {...},
                                                     "Communication Bandwidth Info": {"HCCS": {...}, ...}},
                              ...,
                              "Total Op Info": {...}},
               "p2p": {...}}}

What the simulator's records hold decides what is measured: each collective
is one device item (its start and end on the communicator's stream) that
also states how long the rank waited for its peers, in all and before any
data moved (core's Note [Collective wait times]; CANN measures the same from
its Notify_Wait sub-tasks). So Elapse Time is the item's; Wait Time the
waits, of which Synchronization Time the first; Transit Time the rest (the
data movement; bandwidth is computed from it); Idle Time 0. Records without
wait times (older raw data) count the whole elapse as transit. Sizes are the record's bytes
(the HCCL call's count x element size, Note [Collective activity records]
in core's simulator/activity.h). Records without bytes (CANN, older raw
data) fall back to the launching c10d op's input tensor's shape and dtype
(record_shapes=True) when torch records both, i.e. for ops taking a tensor
(all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single); ops
taking a tensor list (all_reduce, broadcast, ...) record no dtype, and their
size and bandwidth are then 0. The simulator's transport, shared memory
between the ranks' processes on one host, is reported as HCCS (the
intra-node link).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from .model import DeviceItem, HostOp, RunModel

TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
SIMULATED_TRANSPORT = "HCCS"
_P2P = ("HcclSend", "HcclRecv")
_OUTPUT_FIRST = ("c10d::_allgather_base_", "c10d::_reduce_scatter_base_", "c10d::alltoall_base_")
_LARGE_PACKET_MB = 10  # transfers from this size on count as large packets
_MB = 1024 * 1024

# torch's dtype names (torch profiler's "Input type") -> element size in bytes.
_ELEMENT_SIZE = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4, "short int": 2,
    "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
}


def op_type(item: DeviceItem) -> str:
    """Ascend's operator name prefix for a simulator collective:
    HcclAllReduce -> hcom_allReduce_."""
    name = item.name
    if name.startswith("Hccl"):
        name = name[len("Hccl"):]
    elif name.startswith("hccl:"):
        name = "".join(part.capitalize() for part in name[len("hccl:"):].split("_"))
    if name == "Recv":
        name = "Receive"
    return f"hcom_{name[:1].lower()}{name[1:]}_"


def _collective_op(model: RunModel, item: DeviceItem) -> HostOp | None:
    """The c10d op (``c10d::allreduce_``, ...) that launched ``item``: the
    innermost op is the backend's annotation (``hccl:all_reduce``), which
    may outlast the c10d op and so not nest in it; the c10d op is the one on
    its thread running when the annotation began."""
    op = item.op
    if op is None:
        return None
    for host_op in model.host_ops:
        if (host_op.tid == op.tid and host_op.name.startswith("c10d::")
                and host_op.start_ns <= op.start_ns <= host_op.end_ns):
            return host_op
    return None


def transit_bytes(model: RunModel, item: DeviceItem) -> int:
    """The bytes the collective moves as its record states them (count x
    element size); for records without them, the bytes of the c10d op's
    first tensor input, from torch's Input Dims and Input type
    (record_shapes); 0 when unknown. c10d ops taking a tensor list
    (all_reduce, broadcast, ...) record the shapes but not the dtype, so
    their size is unknown there."""
    if item.bytes:
        return item.bytes
    op = _collective_op(model, item)
    if op is None:
        return 0
    tensors = []
    for shape, dtype in zip(op.args.get("Input Dims", []), op.args.get("Input type", [])):
        if dtype == "TensorList":
            return 0
        if dtype in _ELEMENT_SIZE and isinstance(shape, list) and all(isinstance(d, int) for d in shape):
            tensors.append(_ELEMENT_SIZE[dtype] * math.prod(shape))
    # The data this rank sends: the input, after the output for (output, input) ops.
    index = 1 if op.name in _OUTPUT_FIRST and len(tensors) > 1 else 0
    return tensors[index] if tensors else 0


def _bandwidth_entry(size_bytes: int, transit_ns: int) -> dict[str, Any]:
    size_mb = size_bytes / _MB
    time_ms = transit_ns / 1e6
    bandwidth = size_mb / 1024 / (time_ms / 1000) if time_ms > 0 and size_mb > 0 else 0.0
    distribution = {f"{size_mb:.6f}": [1, round(time_ms, 6)]} if size_bytes else {}
    return {
        "Transit Time(ms)": round(time_ms, 6),
        "Transit Size(MB)": round(size_mb, 6),
        "Bandwidth(GB/s)": round(bandwidth, 4),
        "Large Packet Ratio": 1.0 if size_mb >= _LARGE_PACKET_MB else 0.0,
        "Size Distribution": distribution,
    }


def _empty_bandwidth() -> dict[str, Any]:
    return {"Transit Time(ms)": 0.0, "Transit Size(MB)": 0.0, "Bandwidth(GB/s)": 0.0, "Large Packet Ratio": 0.0,
            "Size Distribution": {}}


def _op_info(model: RunModel, item: DeviceItem) -> dict[str, Any]:
    wait_ns = min(max(item.wait_ns, 0), item.dur_ns)
    sync_ns = min(max(item.sync_ns, 0), wait_ns)
    transit_ns = item.dur_ns - wait_ns
    elapse_ms, transit_ms = item.dur_ns / 1e6, transit_ns / 1e6
    wait_ms, sync_ms = round(wait_ns / 1e6, 6), round(sync_ns / 1e6, 6)
    bandwidth = {transport: _empty_bandwidth() for transport in TRANSPORTS}
    bandwidth[SIMULATED_TRANSPORT] = _bandwidth_entry(transit_bytes(model, item), transit_ns)
    return {
        "Communication Time Info": {
            "Start Timestamp(us)": round(item.start_ns / 1000, 3),
            "Elapse Time(ms)": round(elapse_ms, 6),
            "Transit Time(ms)": round(transit_ms, 6),
            "Wait Time(ms)": wait_ms,
            "Synchronization Time(ms)": sync_ms,
            "Idle Time(ms)": round(max(elapse_ms - transit_ms - wait_ms, 0.0), 6),
            "Wait Time Ratio": round(wait_ns / (wait_ns + transit_ns), 4) if wait_ns + transit_ns else 0.0,
            "Synchronization Time Ratio": round(sync_ns / (sync_ns + transit_ns), 4) if sync_ns + transit_ns else 0.0,
        },
        "Communication Bandwidth Info": bandwidth,
    }


def _total(infos: list[dict[str, Any]]) -> dict[str, Any]:
    times = [info["Communication Time Info"] for info in infos]
    time_info: dict[str, Any] = {"Start Timestamp(us)": min(t["Start Timestamp(us)"] for t in times)}
    for key in ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)",
                "Idle Time(ms)"):
        time_info[key] = round(sum(t[key] for t in times), 6)
    transit, wait, sync = (time_info["Transit Time(ms)"], time_info["Wait Time(ms)"],
                           time_info["Synchronization Time(ms)"])
    time_info["Wait Time Ratio"] = round(wait / (wait + transit), 4) if wait + transit else 0.0
    time_info["Synchronization Time Ratio"] = round(sync / (sync + transit), 4) if sync + transit else 0.0
    bandwidth = {}
    for transport in TRANSPORTS:
        entries = [info["Communication Bandwidth Info"][transport] for info in infos]
        size_mb = sum(e["Transit Size(MB)"] for e in entries)
        time_ms = sum(e["Transit Time(ms)"] for e in entries)
        distribution: dict[str, list[float]] = {}
        for entry in entries:
            for size, (count, duration) in entry["Size Distribution"].items():
                slot = distribution.setdefault(size, [0, 0.0])
                slot[0] += count
                slot[1] = round(slot[1] + duration, 6)
        large = sum(e["Large Packet Ratio"] * e["Transit Size(MB)"] for e in entries)
        bandwidth[transport] = {
            "Transit Time(ms)": round(time_ms, 6),
            "Transit Size(MB)": round(size_mb, 6),
            "Bandwidth(GB/s)": round(size_mb / 1024 / (time_ms / 1000), 4) if time_ms > 0 and size_mb > 0 else 0.0,
            "Large Packet Ratio": round(large / size_mb, 4) if size_mb > 0 else 0.0,
            "Size Distribution": distribution,
        }
    return {"Communication Time Info": time_info, "Communication Bandwidth Info": bandwidth}


def _step_key(step: int | None) -> str:
    return f"step{step}" if step is not None else "step"


def communication_ops(model: RunModel) -> Iterator[tuple[str, str, str, DeviceItem]]:
    """(step key, "collective" or "p2p", op key, item) for each collective of
    the recorded steps, in start order; op keys count per type
    (hcom_allReduce__0, hcom_allReduce__1, ...)."""
    sequence: dict[str, int] = defaultdict(int)
    for item in sorted((i for i in model.device_items if i.is_communication), key=lambda i: i.start_ns):
        if model.steps and item.step is None:
            continue
        kind = "p2p" if item.name in _P2P or re.search(r"(send|recv)$", item.name) else "collective"
        name = op_type(item)
        key = f"{name}_{sequence[name]}"
        sequence[name] += 1
        yield _step_key(item.step), kind, key, item


def communication(model: RunModel) -> dict[str, Any]:
    """The content of communication.json (empty when no collective ran)."""
    result: dict[str, dict[str, dict[str, Any]]] = {}
    for step_key, kind, key, item in communication_ops(model):
        step = result.setdefault(step_key, {"collective": {}, "p2p": {}})
        step[kind][key] = _op_info(model, item)
    for step in result.values():
        for ops in step.values():
            if ops:
                ops["Total Op Info"] = _total(list(ops.values()))
    return result
