"""Collectives of the hccl backend inside a captured NPUGraph (torch-npu-graph
with torch-npu-distributed): the communicator stream joins the capture
through the collective's events, and each replay runs the collective again
with the peers' new data."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import torch_npu

pytestmark = pytest.mark.skipif(
    not torch_npu._C._npu_is_capture_supported(),
    reason="the emulated CANN release has no model capture (8.1.RC1 and later)")

RANK = """\
import sys
import torch, torch_npu
import torch.distributed as dist
rank, world = int(sys.argv[1]), int(sys.argv[2])
torch.npu.set_device(rank)
dist.init_process_group("hccl", init_method=f"file://{sys.argv[3]}", rank=rank, world_size=world)
x = torch.zeros(4, device="npu")
dist.all_reduce(x)  # the communicator exists before the capture
torch.npu.synchronize()
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    y = x * 2
    dist.all_reduce(y)
    gathered = torch.empty(world * 4, device="npu")
    dist.all_gather_into_tensor(gathered, y + rank)
    z = gathered.sum()
for step in range(3):
    x.fill_(rank + step + 1.0)
    g.replay()
    print(step, y.cpu().tolist(), z.item(), flush=True)
dist.destroy_process_group()
"""


def test_all_reduce_and_all_gather_replay_with_new_data(tmp_path: Path) -> None:
    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent(RANK))
    store = tmp_path / "store"
    procs = [subprocess.Popen([sys.executable, str(script), str(rank), "2", str(store)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in range(2)]
    outputs = []
    try:
        for rank, proc in enumerate(procs):
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"rank {rank} failed:\n{out}\n{err}"
            outputs.append(out.splitlines())
    finally:
        for proc in procs:
            proc.kill()
    for step in range(3):
        # x is rank + step + 1 on each rank: y = 2 * (1 + 2 + 2 * step).
        total = 2.0 * (3 + 2 * step)
        # gathered = [y + 0] * 4 + [y + 1] * 4.
        expected = f"{step} {[total] * 4} {8 * total + 4.0}"
        assert outputs[0][step] == expected
        assert outputs[1][step] == expected
