"""Runs one Python script per rank, as a multi-rank job does, for the profiler
tests that need real hccl collectives between processes.

Each rank is a fresh interpreter (the simulator's devices and communicators are
per process); the test fails with the rank's own output if any rank fails, and
no rank outlives the call."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

RANK_TIMEOUT_S = 120


def run_rank_script(script: Path, world: int, args: Callable[[int], Sequence[str]],
                    timeout_s: float = RANK_TIMEOUT_S) -> None:
    """Start `script` once per rank with `args(rank)` as its arguments and wait
    for all of them; assert that every rank exited with 0."""
    procs = [subprocess.Popen([sys.executable, str(script), *args(rank)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in range(world)]
    try:
        for rank, proc in enumerate(procs):
            stdout, stderr = proc.communicate(timeout=timeout_s)
            assert proc.returncode == 0, f"rank {rank} failed:\n{stdout}\n{stderr}"
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
