"""communication_matrix.json: per step, per collective, the links it used,
in the layout Ascend documents for a rank's ASCEND_PROFILER_OUTPUT.

    {"step3": {"collective": {"hcom_allReduce__0": {"0-1": {"Transport Type": "HCCS",
                                                            "Transit Size(MB)": ...,
                                                            "Transit Time(ms)": ...,
                                                            "Bandwidth(GB/s)": ...}, ...}},
               "p2p": {"hcom_send__0": {"0-1": {...}}}}}

Links are "src-dst" rank pairs, built from what the simulator's records say
(Note [Collective activity records] in core's simulator/activity.h): the
communicator's rank count, this rank, the peer of point-to-point work, the
bytes of the call and its elapse time. CANN measures each transfer task of
the algorithm HCCL chose (ring, mesh, ...); the simulator runs a collective
as one item over memory every rank's process shares, so the links are
derived, not measured:

- HcclSend: one link, this rank to the peer; HcclRecv: the peer to this rank
  (the data's direction); each carries the record's bytes.
- Other collectives: every rank's data is reachable by every other rank, so
  this rank is the source of a link to each other rank (all pairs), each
  carrying the record's bytes. This is an upper bound of what a ring or mesh
  algorithm puts on one link, not a measurement.
- Transit Time is the collective's whole elapse time for each of its links;
  Bandwidth is Transit Size / Transit Time.
- A batch (HcclBatchSendRecv) does not record its per-peer sizes and
  directions, and a record without a rank count (CANN, raw data of older versions) names no
  ranks: such collectives appear in communication.json only.
"""

from __future__ import annotations

from typing import Any

from .communication import SIMULATED_TRANSPORT, communication_ops, transit_bytes
from .model import DeviceItem, RunModel

_MB = 1024 * 1024


def _links(item: DeviceItem) -> list[tuple[int, int]]:
    """The (src, dst) rank pairs ``item`` is taken to have used."""
    if item.rank_count == 0 or item.name == "HcclBatchSendRecv":
        return []  # no ranks known; a batch's per-peer sizes and directions are not recorded
    if item.peer_rank >= 0:
        return [(item.peer_rank, item.rank)] if item.is_receive else [(item.rank, item.peer_rank)]
    return [(item.rank, other) for other in range(item.rank_count) if other != item.rank]


def _link_info(size_bytes: int, elapse_ns: int) -> dict[str, Any]:
    size_mb = size_bytes / _MB
    time_ms = elapse_ns / 1e6
    return {
        "Transport Type": SIMULATED_TRANSPORT,
        "Transit Size(MB)": round(size_mb, 6),
        "Transit Time(ms)": round(time_ms, 6),
        "Bandwidth(GB/s)": round(size_mb / 1024 / (time_ms / 1000), 4) if time_ms > 0 and size_mb > 0 else 0.0,
    }


def has_matrix(model: RunModel) -> bool:
    """Whether the records name the ranks of some collective."""
    return any(item.is_communication and item.rank_count > 0 for item in model.device_items)


def communication_matrix(model: RunModel) -> dict[str, Any]:
    """The content of communication_matrix.json (steps without a collective
    that names its ranks are left out)."""
    result: dict[str, dict[str, dict[str, Any]]] = {}
    for step_key, kind, key, item in communication_ops(model):
        links = _links(item)
        if not links:
            continue
        size = transit_bytes(model, item)
        step = result.setdefault(step_key, {"collective": {}, "p2p": {}})
        step[kind][key] = {f"{src}-{dst}": _link_info(size, item.dur_ns) for src, dst in links}
    return result
