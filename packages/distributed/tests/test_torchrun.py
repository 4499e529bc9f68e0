"""`torchrun` starts hccl jobs: its environment is all a rank needs.

The ranks (torchrun_worker.py) check nothing themselves; they write what
they saw to one JSON file each, which the test compares with what the
collectives must give and with single-process training on the CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch
from torchrun_worker import STEPS, train_on_cpu

WORKER = Path(__file__).with_name("torchrun_worker.py")


def torchrun(out_dir: Path, *worker_args: str, nproc: int = 2,
             timeout: float = 180) -> subprocess.CompletedProcess:
    """The venv's torchrun (`python -m torch.distributed.run`), standalone."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", str(nproc), str(WORKER), str(out_dir), *worker_args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def test_torchrun_runs_collectives_and_ddp_training(tmp_path):
    proc = torchrun(tmp_path)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]

    reference = train_on_cpu()
    for rank, result in enumerate(results):
        assert (result["rank"], result["world_size"], result["local_rank"]) == (rank, 2, rank)
        assert result["device"] == str(rank) and result["backend"] == "hccl"
        assert result["all_reduce"] == [3.0] * 5
        assert result["all_gather"] == [[0, 0], [1, 10]]
        assert result["broadcast"] == [100.0, 101.0, 102.0, 103.0]
        assert len(result["ddp_losses"]) == STEPS
        # Averaged gradients of half batches equal the whole batch's up to rounding.
        for got, expected in zip(result["ddp_parameters"], reference, strict=True):
            torch.testing.assert_close(torch.tensor(got), torch.tensor(expected),
                                       rtol=0, atol=1e-6)
    # Both replicas hold the same parameters, bit for bit.
    assert results[0]["ddp_parameters"] == results[1]["ddp_parameters"]


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
