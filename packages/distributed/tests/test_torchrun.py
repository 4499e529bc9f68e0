"""`torchrun` starts hccl jobs: its environment is all a rank needs.

The ranks (torchrun_worker.py) check nothing themselves; they write what
they saw to one JSON file each, which the test compares with what the
collectives must give and with single-process training on the CPU.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torchrun_worker import STEPS, train_on_cpu

WORKER = Path(__file__).with_name("torchrun_worker.py")


def torchrun_command(out_dir: Path, *args: str) -> list[str]:
    """The venv's torchrun (`python -m torch.distributed.run`) with `args`,
    running the worker. Its agent's logs go under `out_dir`: by default it
    makes a /tmp/torchelastic_* directory per run and never removes it."""
    return [sys.executable, "-m", "torch.distributed.run", "--log-dir", str(out_dir / "torchrun-logs"),
            *args, str(WORKER), str(out_dir)]


def torchrun(out_dir: Path, *worker_args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """One standalone torchrun of 2 ranks on this machine."""
    command = torchrun_command(out_dir, "--standalone", "--nproc-per-node", "2") + list(worker_args)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def check_results(out_dir: Path, local_ranks: list[int]) -> None:
    """The ranks' collectives and DDP training gave what they must; rank r
    is local rank local_ranks[r]."""
    world = len(local_ranks)
    results = [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(world)]
    reference = train_on_cpu()
    for rank, result in enumerate(results):
        assert (result["rank"], result["world_size"]) == (rank, world)
        assert result["local_rank"] == local_ranks[rank]
        assert result["device"] == str(local_ranks[rank]) and result["backend"] == "hccl"
        assert result["all_reduce"] == [world * (world + 1) / 2] * 5
        assert result["all_gather"] == [[r, 10 * r] for r in range(world)]
        assert result["broadcast"] == [100.0 * (world - 1) + i for i in range(4)]
        assert result["all_to_all"] == [100 * s + rank for s in range(world)]
        assert len(result["ddp_losses"]) == STEPS
        # Averaged gradients of half batches equal the whole batch's up to rounding.
        for got, expected in zip(result["ddp_parameters"], reference, strict=True):
            torch.testing.assert_close(torch.tensor(got), torch.tensor(expected),
                                       rtol=0, atol=1e-6)
    # Every replica holds the same parameters, bit for bit.
    for result in results[1:]:
        assert result["ddp_parameters"] == results[0]["ddp_parameters"]


def test_torchrun_runs_collectives_and_ddp_training(tmp_path):
    proc = torchrun(tmp_path)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    check_results(tmp_path, local_ranks=[0, 1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("per_node", [1, 2])
def test_two_torchrun_nodes_over_loopback(tmp_path, per_node):
    # Two torchrun invocations, one per "node" (--node-rank 0 and 1), meeting
    # through rank 0's TCP store on 127.0.0.1. Each node claims its own
    # machine (NPU_SIM_HOST_ID), so the simulated HCCL joins the ranks over
    # TCP, as between real machines: the root info, with the address of its
    # rendezvous server, goes through the c10d store, and the collectives
    # run on the socket transport (Note [Socket transport]), which each rank
    # reports (NPU_SIM_HCCL_LOG). With two ranks per node, the two of a node
    # first meet through shared memory and switch.
    port = str(free_port())
    nodes = [subprocess.Popen(torchrun_command(tmp_path, "--nnodes", "2", "--node-rank", str(n),
                                               "--nproc-per-node", str(per_node),
                                               "--master-addr", "127.0.0.1",
                                               "--master-port", port),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "NPU_SIM_HOST_ID": f"node-{n}",
                                   "HCCL_IF_IP": "127.0.0.1", "NPU_SIM_HCCL_LOG": "1"})
             for n in range(2)]
    try:
        for n, node in enumerate(nodes):
            out, err = node.communicate(timeout=180)
            assert node.returncode == 0, f"node {n}:\nstdout:\n{out}\nstderr:\n{err}"
            for local in range(per_node):
                assert (f"HCCL rank {n * per_node + local} of {2 * per_node} joined" in err
                        and "over the socket transport (2 machines)" in err), err
    finally:
        for node in nodes:
            node.kill()
    check_results(tmp_path, local_ranks=[r % per_node for r in range(2 * per_node)])


def test_a_rank_that_raises_makes_torchrun_fail(tmp_path):
    failing_rank = 1
    # The other rank waits in a collective that can never complete; torchrun
    # must stop it and report the failure instead of hanging (the timeout
    # of subprocess.run, far above the seconds this takes, catches a hang).
    proc = torchrun(tmp_path, "--raise-on-rank", str(failing_rank), timeout=120)
    assert proc.returncode != 0
    assert f"rank {failing_rank} fails on purpose" in proc.stderr, proc.stderr
    assert "ChildFailedError" in proc.stderr, proc.stderr
    assert not list(tmp_path.glob("rank*.json"))
