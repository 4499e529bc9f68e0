"""Code written for cuda and nccl runs on npu and hccl under transfer_to_npu
(torch-npu-ops' contrib module and torch-npu-distributed's backend together)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

RANK = textwrap.dedent("""\
    import sys
    import torch, torch_npu
    from torch_npu.contrib import transfer_to_npu  # noqa: F401
    import torch.distributed as dist

    rank, store = int(sys.argv[1]), sys.argv[2]
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{store}", rank=rank, world_size=2)
    t = torch.ones(3, device="cuda") * (rank + 1)
    dist.all_reduce(t)
    print(dist.get_backend(), t.device, t.tolist())
    dist.destroy_process_group()
""")


def test_nccl_code_all_reduces_over_hccl(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    procs = [subprocess.Popen([sys.executable, str(script), str(r), str(tmp_path / "store")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    for rank, proc in enumerate(procs):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out == f"hccl npu:{rank} [3.0, 3.0, 3.0]\n"
