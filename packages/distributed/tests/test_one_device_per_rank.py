"""A rank's collectives on another device than its group's (Note [One device per rank]).

Each device has its own communicator, which every rank must create together:
a rank that moves alone (typically an object collective, which puts its bytes
on the current device, before torch.npu.set_device) hangs until the group's
timeout. A group bound to a device refuses other npus at once; an unbound
one warns at the move and its timeout names the move.
"""

from __future__ import annotations

from test_process_group_hccl import run_ranks

BOUND = """\
import sys, warnings
warnings.filterwarnings("ignore", category=FutureWarning)
import torch, torch_npu
import torch.distributed as dist
rank, world = int(sys.argv[1]), int(sys.argv[2])
torch.npu.set_device(rank)
dist.init_process_group("hccl", init_method=f"file://{sys.argv[3]}", rank=rank, world_size=world,
                        device_id=torch.device("npu", rank))
"""


def test_a_group_bound_to_a_device_refuses_tensors_on_another_at_once(tmp_path):
    outputs = run_ranks(tmp_path, """
        other = torch.device("npu", 1 - rank)
        try:
            dist.all_reduce(torch.ones(3, device=other))
            print("no error")
        except ValueError as e:
            print(str(e))
        # Nothing was queued nor counted: the group goes on.
        t = torch.full((3,), float(rank + 1), device="npu")
        dist.all_reduce(t)
        print(t.tolist())
        dist.destroy_process_group()
    """, prelude=BOUND)
    for rank, out in enumerate(outputs):
        refusal, result = out.splitlines()
        assert f"rank {rank} got a collective on npu:{1 - rank}" in refusal, refusal
        assert f"bound to npu:{rank}" in refusal and "torch.npu.set_device" in refusal, refusal
        assert result == "[3.0, 3.0, 3.0]"


UNBOUND_ON_NPU0 = """\
import os, sys, warnings
from datetime import timedelta
warnings.filterwarnings("ignore", category=FutureWarning)
import torch, torch_npu
import torch.distributed as dist
rank, world = int(sys.argv[1]), int(sys.argv[2])
torch.npu.set_device(0)
dist.init_process_group("hccl", init_method=f"file://{sys.argv[3]}", rank=rank, world_size=world,
                        timeout=timedelta(seconds=4))
"""


def test_a_rank_that_moves_alone_is_told_why_it_waits(tmp_path):
    outputs = run_ranks(tmp_path, """
        gathered = [None] * world
        dist.all_gather_object(gathered, rank)  # on npu:0, the current device of both
        print(gathered)
        if rank == 1:
            torch.npu.set_device(1)  # too late: the group's communicator is on npu:0
        # C++ warnings of the collective go to stderr (it runs without the GIL).
        log = f"{sys.argv[3]}.stderr{rank}"
        os.dup2(os.open(log, os.O_WRONLY | os.O_CREAT), 2)
        try:
            t = torch.ones(3, device="npu")
            dist.all_reduce(t)
            t.cpu()
            print("no error")
        except Exception as e:
            print(type(e).__name__, str(e).splitlines()[0])
        print([line for line in open(log) if "ProcessGroupHCCL" in line and "Warning" in line])
    """, prelude=UNBOUND_ON_NPU0)
    assert outputs[0].splitlines()[0] == "[0, 1]"
    # Rank 0 waited in its collective on npu:0 for rank 1.
    assert "timed out" in outputs[0].splitlines()[1], outputs[0]
    assert outputs[0].splitlines()[2] == "[]"
    # Rank 1 was warned at the move, and its timeout names it.
    _, error, warned = outputs[1].splitlines()
    assert error.startswith("DistBackendError") and "communicator of npu:1" in error, error
    assert "earlier collectives of the group ran on npu:0" in error, error
    assert "torch.npu.set_device before the first collective" in error, error
    assert "rank 1 runs a collective on npu:1 after collectives of this group on npu:0" in warned, warned
