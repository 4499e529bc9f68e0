"""Data-dependent and sparse ops: npu (simulator) vs CPU, side by side in one run.

    python benchmarks/sync_ops.py

npu time / cpu time per op, each op followed by the next at once, and
whether the host waited for the device ("path"). Ops whose result's size
depends on the data (nonzero, a sum of COO tensors) make it wait: the issue
sets no target for them, and the figures show what waiting for the device
costs on this machine (a thread hand-off, and a wake-up when the waiting
thread slept), which the asynchronous benchmarks in ops_throughput.py never
pay. A sparse matrix times a dense one has a dense result whose shape is
known in advance, so it is queued (after the first call with a structure,
which the warm-up makes).

Each figure is the median of 9 trials that alternate between cpu and npu.
"""

from __future__ import annotations

import os
import warnings

import torch

import torch_npu
from ops_throughput import pair

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")


def nonzero(size: int):
    def make(device):
        mask = (torch.rand(size, generator=torch.Generator().manual_seed(0)) > 0.5).to(device)
        return lambda: torch.nonzero(mask)
    return make


def sparse_mm(layout: torch.layout):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2000, 2000, generator=g) * (torch.rand(2000, 2000, generator=g) < 0.01)
    dense = torch.randn(2000, 64, generator=g)
    sparse = x.to_sparse_csr() if layout == torch.sparse_csr else x.to_sparse()

    def make(device):
        s, d = sparse.to(device), dense.to(device)
        return lambda: torch.sparse.mm(s, d)
    return make


def coo_sum():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2000, 2000, generator=g) * (torch.rand(2000, 2000, generator=g) < 0.01)
    sparse = x.to_sparse()

    def make(device):
        s = sparse.to(device)
        return lambda: s + s
    return make


def waits(make) -> str:
    """Whether the npu op made the host wait (after a warm-up call)."""
    fn = make("npu")
    fn()
    before = torch_npu.ops.execution_counters()["device_sync"]
    fn()
    torch.npu.synchronize()
    return "waits" if torch_npu.ops.execution_counters()["device_sync"] > before else "queued"


def main() -> None:
    print(f"torch {torch.__version__}, torch_npu {torch_npu.__version__}, "
          f"{torch.get_num_threads()} CPU threads, NPU_SIM_CHECKER={os.environ.get('NPU_SIM_CHECKER', '')}")
    print(f"{'benchmark':30s} {'cpu':>10s} {'npu':>10s} {'npu/cpu time':>13s}  path")
    cases = [
        ("nonzero 10k", nonzero(10_000), 200),
        ("nonzero 200k", nonzero(200_000), 20),
        ("nonzero 2M", nonzero(2_000_000), 3),
        ("csr (2000^2, 1%) @ dense", sparse_mm(torch.sparse_csr), 20),
        ("coo (2000^2, 1%) @ dense", sparse_mm(torch.sparse_coo), 10),
        ("coo (2000^2, 1%) + coo", coo_sum(), 20),
    ]
    for name, make, iterations in cases:
        cpu, npu = pair(make, iterations)
        print(f"{name:30s} {cpu * 1e6:8.1f}us {npu * 1e6:8.1f}us {npu / cpu:13.2f}  {waits(make)}")


if __name__ == "__main__":
    main()
