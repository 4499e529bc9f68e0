"""A two-rank run (one process per rank over the hccl backend): one result
directory per rank, each with communication.json in Ascend's layout, and
kernels and HCCL lanes in its trace."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

TIME_INFO = ["Start Timestamp(us)", "Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)",
             "Synchronization Time(ms)", "Idle Time(ms)", "Wait Time Ratio", "Synchronization Time Ratio"]
BANDWIDTH_INFO = ["Transit Time(ms)", "Transit Size(MB)", "Bandwidth(GB/s)", "Large Packet Ratio",
                  "Size Distribution"]

RANK_SCRIPT = """\
import os, sys, warnings
warnings.filterwarnings("ignore", category=FutureWarning)
import torch, torch_npu
import torch.distributed as dist
from torch_npu.profiler import profile, schedule, tensorboard_trace_handler
rank, world = int(sys.argv[1]), int(sys.argv[2])
torch.npu.set_device(rank)
dist.init_process_group("hccl", init_method=f"file://{sys.argv[3]}", rank=rank, world_size=world)
x = torch.ones(256, 64).npu()
with profile(schedule=schedule(wait=0, active=2, repeat=1, skip_first=1), record_shapes=True,
             on_trace_ready=tensorboard_trace_handler(os.path.join(sys.argv[4], f"rank{rank}"))) as prof:
    for _ in range(4):
        y = (x * (rank + 1)).relu()
        dist.all_reduce(y)
        gathered = torch.empty(512, 64).npu()
        dist.all_gather_into_tensor(gathered, y)
        assert gathered[0, 0].item() == 3.0
        prof.step()
dist.destroy_process_group()
"""


def run_ranks(tmp_path: Path, world: int = 2) -> Path:
    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent(RANK_SCRIPT))
    out = tmp_path / "out"
    procs = [subprocess.Popen([sys.executable, str(script), str(rank), str(world), str(tmp_path / "store"),
                               str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in range(world)]
    try:
        for rank, proc in enumerate(procs):
            stdout, stderr = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"rank {rank} failed:\n{stdout}\n{stderr}"
    finally:
        for proc in procs:
            proc.kill()
    return out


def test_two_ranks_write_communication_json(tmp_path):
    out = run_ranks(tmp_path)
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
            assert sorted(collective) == sorted([f"hcom_allReduce__{n}", f"hcom_allGather__{n}", "Total Op Info"])
            assert communication[step]["p2p"] == {}
            for name, op in collective.items():
                time_info = op["Communication Time Info"]
                assert list(time_info) == TIME_INFO
                assert time_info["Elapse Time(ms)"] > 0
                assert time_info["Transit Time(ms)"] == time_info["Elapse Time(ms)"]
                bandwidth = op["Communication Bandwidth Info"]
                assert sorted(bandwidth) == sorted(["RDMA", "HCCS", "PCIE", "SDMA", "SIO"])
                for entry in bandwidth.values():
                    assert list(entry) == BANDWIDTH_INFO
            # all_gather_into_tensor's input, 256x64 float32, is known from its shape and dtype;
            # all_reduce takes a tensor list, whose dtype torch does not record.
            gather = collective[f"hcom_allGather__{n}"]["Communication Bandwidth Info"]["HCCS"]
            assert gather["Transit Size(MB)"] == 0.0625 and gather["Bandwidth(GB/s)"] > 0
            assert collective[f"hcom_allReduce__{n}"]["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"] == 0
            total = collective["Total Op Info"]["Communication Time Info"]
            assert abs(total["Elapse Time(ms)"] - sum(
                op["Communication Time Info"]["Elapse Time(ms)"] for name, op in collective.items()
                if name != "Total Op Info")) < 1e-5

        trace = json.loads((output / "trace_view.json").read_text())
        processes = {e["pid"]: e["args"]["name"] for e in trace if e.get("name") == "process_name"}
        kernels = {e["name"] for e in trace if e.get("ph") == "X" and processes.get(e["pid"]) == "Ascend Hardware"}
        assert {"aten::mul", "aten::relu", "HcclAllReduce", "HcclAllGather"} <= kernels
        hccl_lane = [e for e in trace if e.get("ph") == "X" and processes.get(e["pid"]) == "HCCL"]
        assert sorted(e["name"] for e in hccl_lane) == ["HcclAllGather"] * 2 + ["HcclAllReduce"] * 2
        kernel_rows = (output / "kernel_details.csv").read_text().splitlines()
        assert any(",HcclAllReduce,HcclAllReduce,HCCL," in row for row in kernel_rows)
        step_trace = (output / "step_trace_time.csv").read_text().splitlines()[1:]
        assert len(step_trace) == 2 and all(float(row.split(",")[5]) > 0 for row in step_trace)  # Communication
