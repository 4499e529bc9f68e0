"""A two-rank run (one process per rank over the hccl backend): one result
directory per rank, each with communication.json and communication_matrix.json
in Ascend's layout, and kernels and HCCL lanes in its trace."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from _rank_processes import run_rank_script

TIME_INFO = ["Start Timestamp(us)", "Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)",
             "Synchronization Time(ms)", "Idle Time(ms)", "Wait Time Ratio", "Synchronization Time Ratio"]
BANDWIDTH_INFO = ["Transit Time(ms)", "Transit Size(MB)", "Bandwidth(GB/s)", "Large Packet Ratio",
                  "Size Distribution"]

MATRIX_LINK_INFO = ["Transport Type", "Transit Size(MB)", "Transit Time(ms)", "Bandwidth(GB/s)"]

RANK_SCRIPT = """\
import os, sys, time, warnings
warnings.filterwarnings("ignore", category=FutureWarning)
import torch, torch_npu
import torch.distributed as dist
from torch_npu.profiler import _ExperimentalConfig, profile, schedule, tensorboard_trace_handler
rank, world = int(sys.argv[1]), int(sys.argv[2])
torch.npu.set_device(rank)
dist.init_process_group("hccl", init_method=f"file://{sys.argv[3]}", rank=rank, world_size=world)
x = torch.ones(256, 64).npu()
os.makedirs(sys.argv[4], exist_ok=True)
with profile(schedule=schedule(wait=0, active=2, repeat=1, skip_first=1), record_shapes=True,
             experimental_config=_ExperimentalConfig(data_simplification=False),
             on_trace_ready=tensorboard_trace_handler(os.path.join(sys.argv[4], f"rank{rank}"))) as prof:
    for step in range(4):
        y = (x * (rank + 1)).relu()
        dist.all_reduce(y)
        gathered = torch.empty(512, 64).npu()
        dist.all_gather_into_tensor(gathered, y)
        assert gathered[0, 0].item() == 3.0
        # Rank 1 comes to the broadcast LATE_S after rank 0 launched it (rank 0
        # notes when, on the records' clock): rank 0 waits for it.
        marker = os.path.join(sys.argv[4], f"broadcast{step}")
        if rank == 0:
            dist.broadcast(y, src=0)
            with open(marker + ".tmp", "w") as f:
                f.write(str(time.monotonic_ns()))
            os.rename(marker + ".tmp", marker)
        else:
            deadline = time.monotonic() + 60
            while not os.path.exists(marker):
                assert time.monotonic() < deadline, "rank 0 never launched the broadcast"
                time.sleep(0.001)
            time.sleep(LATE_S)
            dist.broadcast(y, src=0)
        if rank == 0:
            dist.send(y[:16], dst=1)
        else:
            dist.recv(y[:16], src=0)
        prof.step()
dist.destroy_process_group()
"""


LATE_S = 0.1  # how late rank 1 comes to each broadcast


def run_ranks(tmp_path: Path, world: int = 2) -> Path:
    script = tmp_path / "rank.py"
    script.write_text(f"LATE_S = {LATE_S}\n" + textwrap.dedent(RANK_SCRIPT))
    out = tmp_path / "out"
    run_rank_script(script, world, lambda rank: [str(rank), str(world), str(tmp_path / "store"), str(out)])
    return out


@pytest.fixture(scope="module")
def ranks_output(tmp_path_factory) -> Path:
    """One two-rank run's results, shared by this file's tests."""
    return run_ranks(tmp_path_factory.mktemp("ranks"))


def test_two_ranks_write_communication_json(ranks_output):
    out = ranks_output
    for rank in range(2):
        results = list((out / f"rank{rank}").glob("*_ascend_pt"))
        assert len(results) == 1, results
        output = results[0] / "ASCEND_PROFILER_OUTPUT"
        info = json.loads((results[0] / "profiler_info.json").read_text())
        assert info["rank_id"] == rank

        communication = json.loads((output / "communication.json").read_text())
        assert sorted(communication) == ["step1", "step2"]
        for step, n in (("step1", 0), ("step2", 1)):
            collective = communication[step]["collective"]
            assert sorted(collective) == sorted([f"hcom_allReduce__{n}", f"hcom_allGather__{n}",
                                                 f"hcom_broadcast__{n}", "Total Op Info"])
            p2p_op = f"hcom_send__{n}" if rank == 0 else f"hcom_receive__{n}"
            assert sorted(communication[step]["p2p"]) == sorted([p2p_op, "Total Op Info"])
            for name, op in collective.items():
                time_info = op["Communication Time Info"]
                assert list(time_info) == TIME_INFO
                assert time_info["Elapse Time(ms)"] > 0
                # The elapse splits into waiting for the peer (its first
                # wait: synchronization) and moving data.
                assert 0 <= time_info["Synchronization Time(ms)"] <= time_info["Wait Time(ms)"]
                assert abs(time_info["Transit Time(ms)"] + time_info["Wait Time(ms)"]
                           - time_info["Elapse Time(ms)"]) < 2e-6
                assert time_info["Transit Time(ms)"] > 0 and time_info["Idle Time(ms)"] == 0
                bandwidth = op["Communication Bandwidth Info"]
                assert sorted(bandwidth) == sorted(["RDMA", "HCCS", "PCIE", "SDMA", "SIO"])
                for entry in bandwidth.values():
                    assert list(entry) == BANDWIDTH_INFO
            # The records' bytes (count x element size): 256x64 float32 for each
            # collective, also for all_reduce and broadcast, which take a tensor
            # list whose dtype torch's profiler does not record; 16x64 for the send.
            for name in (f"hcom_allGather__{n}", f"hcom_allReduce__{n}", f"hcom_broadcast__{n}"):
                hccs = collective[name]["Communication Bandwidth Info"]["HCCS"]
                assert hccs["Transit Size(MB)"] == 0.0625 and hccs["Bandwidth(GB/s)"] > 0, name
            p2p_hccs = communication[step]["p2p"][p2p_op]["Communication Bandwidth Info"]["HCCS"]
            assert p2p_hccs["Transit Size(MB)"] == round(16 * 64 * 4 / 2**20, 6)
            total = collective["Total Op Info"]["Communication Time Info"]
            assert abs(total["Elapse Time(ms)"] - sum(
                op["Communication Time Info"]["Elapse Time(ms)"] for name, op in collective.items()
                if name != "Total Op Info")) < 1e-5

        trace = json.loads((output / "trace_view.json").read_text())
        processes = {e["pid"]: e["args"]["name"] for e in trace if e.get("name") == "process_name"}
        kernels = {e["name"] for e in trace if e.get("ph") == "X" and processes.get(e["pid"]) == "Ascend Hardware"}
        assert {"aten::mul", "aten::relu", "HcclAllReduce", "HcclAllGather"} <= kernels
        hccl_lane = [e for e in trace if e.get("ph") == "X" and processes.get(e["pid"]) == "HCCL"]
        p2p_kernel = "HcclSend" if rank == 0 else "HcclRecv"
        assert sorted(e["name"] for e in hccl_lane) == sorted(
            ["HcclAllGather", "HcclAllReduce", "HcclBroadcast", p2p_kernel] * 2)
        kernel_rows = (output / "kernel_details.csv").read_text().splitlines()
        assert any(",HcclAllReduce,HcclAllReduce,HCCL," in row for row in kernel_rows)
        step_trace = (output / "step_trace_time.csv").read_text().splitlines()[1:]
        assert len(step_trace) == 2 and all(float(row.split(",")[5]) > 0 for row in step_trace)  # Communication


def test_two_ranks_write_communication_matrix_json(ranks_output):
    out = ranks_output
    for rank in range(2):
        (result,) = (out / f"rank{rank}").glob("*_ascend_pt")
        matrix = json.loads((result / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").read_text())
        assert sorted(matrix) == ["step1", "step2"]
        for step, n in (("step1", 0), ("step2", 1)):
            collective, p2p = matrix[step]["collective"], matrix[step]["p2p"]
            assert sorted(collective) == sorted([f"hcom_allReduce__{n}", f"hcom_allGather__{n}",
                                                 f"hcom_broadcast__{n}"])
            # Collectives: this rank to every other rank; point-to-point: the data's direction.
            for links in collective.values():
                assert list(links) == [f"{rank}-{1 - rank}"]
            assert p2p == {(f"hcom_send__{n}" if rank == 0 else f"hcom_receive__{n}"): p2p[next(iter(p2p))]}
            assert list(next(iter(p2p.values()))) == ["0-1"]
            for links in [*collective.values(), *p2p.values()]:
                for link in links.values():
                    assert list(link) == MATRIX_LINK_INFO
                    assert link["Transport Type"] == "HCCS"
                    assert link["Transit Time(ms)"] > 0 and link["Bandwidth(GB/s)"] > 0
            assert collective[f"hcom_allReduce__{n}"][f"{rank}-{1 - rank}"]["Transit Size(MB)"] == 0.0625


def test_wait_times_are_how_long_a_rank_waited_for_its_peer(ranks_output):
    # Core's Note [Collective wait times]: rank 1 came to each broadcast
    # LATE_S after rank 0 had launched it (at `launched`, CLOCK_MONOTONIC as
    # the records): rank 0's broadcast waited at least that long, less any
    # delay before its own worker began it.
    results = {rank: next((ranks_output / f"rank{rank}").glob("*_ascend_pt")) for rank in range(2)}
    records = {rank: [r for r in json.loads((result / "FRAMEWORK" / "device_activity.json").read_text())
                      if r["name"] == "HcclBroadcast"] for rank, result in results.items()}
    assert len(records[0]) == len(records[1]) == 2
    for step, (early, late) in enumerate(zip(records[0], records[1])):
        launched = int((ranks_output / f"broadcast{step + 1}").read_text())  # steps 1, 2 are recorded
        own_delay = max(0, early["start_ns"] - launched)
        assert early["sync_ns"] >= LATE_S * 1e9 - own_delay
        assert early["wait_ns"] >= early["sync_ns"]
        assert early["end_ns"] - early["start_ns"] >= early["wait_ns"]
        # The late rank hardly waited, at least much less than it was late.
        assert late["sync_ns"] < early["sync_ns"]
        communication = json.loads((results[0] / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
        info = communication[f"step{step + 1}"]["collective"][f"hcom_broadcast__{step}"]["Communication Time Info"]
        assert info["Synchronization Time(ms)"] == round(early["sync_ns"] / 1e6, 6)
        assert info["Wait Time(ms)"] == round(early["wait_ns"] / 1e6, 6)
        assert info["Wait Time Ratio"] > 0 and info["Synchronization Time Ratio"] > 0
    # Every other collective's records carry wait times too (0 <= sync <= wait <= elapse).
    for rank, result in results.items():
        for r in json.loads((result / "FRAMEWORK" / "device_activity.json").read_text()):
            if r["name"].startswith("Hccl"):
                assert 0 <= r["sync_ns"] <= r["wait_ns"] <= r["end_ns"] - r["start_ns"], r
