"""Ranks and their devices.

Two ranks of a machine on one device (processes that never call
torch.npu.set_device, so all run on npu:0) are refused when their
communicator is created, as NCCL refuses a duplicate GPU (the simulator's
Note [One device per rank of a machine]).

A rank's collectives on another device than its group's (Note [One device
per rank]): each device has its own communicator, which every rank must
create together, so a rank that moves alone hangs until the group's timeout.
A group bound to a device refuses other npus at once; an unbound one warns
at the move and its timeout names the move.
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


UNBOUND = """\
import os, sys, warnings
from datetime import timedelta
warnings.filterwarnings("ignore", category=FutureWarning)
import torch, torch_npu
import torch.distributed as dist
rank, world = int(sys.argv[1]), int(sys.argv[2])
dist.init_process_group("hccl", init_method=f"file://{sys.argv[3]}", rank=rank, world_size=world,
                        timeout=timedelta(seconds=4))
"""


def test_ranks_that_share_a_device_are_refused_at_their_first_collective(tmp_path):
    # No torch.npu.set_device: an object collective puts its bytes on the
    # current device, npu:0, in both processes.
    outputs = run_ranks(tmp_path, """
        try:
            gathered = [None] * world
            dist.all_gather_object(gathered, rank)
            print("no error", gathered)
        except Exception as e:
            print(type(e).__name__, str(e).replace(chr(10), " "))
    """, prelude=UNBOUND)
    for out in outputs:
        # Both ranks fail at once (well within the 4 s timeout), with one message.
        assert out.startswith("DistBackendError"), out
        assert "ranks 0 and 1 of the communicator both use the device with physical id 0" in out, out
        assert "torch.npu.set_device(local_rank)" in out and "device_id=" in out, out
    assert outputs[0].split(":", 1)[1] == outputs[1].split(":", 1)[1]


def test_ranks_on_one_visible_device_each_are_not_refused(tmp_path):
    # ASCEND_RT_VISIBLE_DEVICES gives each process another physical device
    # as its npu:0: not a shared device.
    outputs = run_ranks(tmp_path, """
        t = torch.full((2,), float(rank + 1), device="npu")
        dist.all_reduce(t)
        print(t.device, t.tolist())
    """, prelude='import os, sys; os.environ["ASCEND_RT_VISIBLE_DEVICES"] = str(3 + int(sys.argv[1]))\n' + UNBOUND)
    assert outputs == ["npu:0 [3.0, 3.0]\n"] * 2


def test_a_rank_that_moves_alone_is_told_why_it_waits(tmp_path):
    outputs = run_ranks(tmp_path, """
        torch.npu.set_device(rank)
        gathered = [None] * world
        dist.all_gather_object(gathered, rank)  # on npu:0 and npu:1
        print(gathered)
        if rank == 1:
            torch.npu.set_device(2)  # alone: the group's communicators are on npu:0 and npu:1
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
    """, prelude=UNBOUND)
    assert outputs[0].splitlines()[0] == "[0, 1]"
    # Rank 0 waited in its collective on npu:0 for rank 1.
    assert "timed out" in outputs[0].splitlines()[1], outputs[0]
    assert outputs[0].splitlines()[2] == "[]"
    # Rank 1 was warned at the move, and its timeout names it.
    _, error, warned = outputs[1].splitlines()
    assert error.startswith("DistBackendError") and "communicator of npu:2" in error, error
    assert "earlier collectives of the group ran on npu:1" in error, error
    assert "torch.npu.set_device before the first collective" in error, error
    assert "rank 1 runs a collective on npu:2 after collectives of this group on npu:1" in warned, warned
