"""examples/cpp_allreduce: a C++ program (no Python) that builds against the
installed packages' CMake config (find_package(TorchNPUDistributed)) and
all-reduces across 2 processes with c10d_npu::ProcessGroupHCCL."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

import torch_npu.distributed
from torch_npu.utils.cmake_build import build_cmake_project

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "cpp_allreduce"


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    """The example built in a temporary directory; only the distributed
    package's prefix is given, so its config has to find core's itself."""
    return build_cmake_project(EXAMPLE, tmp_path_factory.mktemp("cpp_allreduce"),
                               [torch_npu.distributed.cmake_prefix_path], "cpp_allreduce")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_all_reduce_and_check_the_sum(example):
    port = str(_free_port())
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    # Rank 0 takes its settings from the command line, rank 1 from the
    # environment, as torchrun would set it.
    ranks = [
        subprocess.Popen([str(example), "0", "2", "127.0.0.1", port], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
        subprocess.Popen([str(example)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**env, "RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                              "MASTER_PORT": port}),
    ]
    outputs = []
    try:
        for process in ranks:
            outputs.append(process.communicate(timeout=120))
    finally:
        for process in ranks:
            process.kill()
    for rank, (process, (out, err)) in enumerate(zip(ranks, outputs)):
        assert process.returncode == 0, f"rank {rank}: {out}{err}"
        assert out.strip() == f"rank {rank} on npu:{rank}: all_reduce sum = 3 (expected 3): ok"


def test_missing_settings_are_reported(example):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    run = subprocess.run([str(example)], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.startswith("cpp_allreduce: missing RANK: usage: cpp_allreduce <rank> <world size>")
    run = subprocess.run([str(example), "2", "2"], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "the rank must be in [0, world size)" in run.stderr
