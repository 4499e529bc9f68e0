"""One rank of a job that `torchrun` starts (test_torchrun.py).

    python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        torchrun_worker.py OUT_DIR [--raise-on-rank R]

Everything comes from torchrun's environment (`RANK`, `WORLD_SIZE`,
`LOCAL_RANK`, `MASTER_ADDR`/`MASTER_PORT`): `init_process_group("hccl")`
with the default `env://`, `torch.npu.set_device(LOCAL_RANK)`. The rank runs
all_reduce, all_gather, broadcast and all_to_all_single, trains a tiny
model with DDP for `STEPS` steps, and writes what it saw to
`OUT_DIR/rank<RANK>.json` for the test to compare with single-process
training on the CPU (`train_on_cpu`, which the test imports from here).

With `--raise-on-rank R`, rank R raises after the first collective while the
others go on into a second one that can never complete: torchrun must then
stop the job and exit non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

STEPS = 2
BATCH = 8  # the whole batch of one step; each of the W ranks takes BATCH / W rows


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 10), torch.nn.Tanh(), torch.nn.Linear(10, 3))


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, 6, generator=g), torch.randn(BATCH, 3, generator=g))
            for _ in range(STEPS)]


def train(model: torch.nn.Module, steps: list[tuple[torch.Tensor, torch.Tensor]],
          device: str) -> list[float]:
    """SGD on mean squared error; returns the loss of each step."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in steps:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def train_on_cpu() -> list[list[float]]:
    """The reference: the whole batch in one process on the CPU; the final
    parameters, flattened, in `model.parameters()` order."""
    model = make_model()
    train(model, batches(), "cpu")
    return [p.detach().flatten().tolist() for p in model.parameters()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--raise-on-rank", type=int, default=None)
    args = parser.parse_args()

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    import torch_npu  # noqa: F401  (the npu device and the hccl backend)

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("hccl")
    torch.npu.set_device(local_rank)
    device = f"npu:{local_rank}"

    t = torch.full((5,), float(rank + 1), device=device)
    dist.all_reduce(t)
    all_reduce = t.cpu().tolist()

    if args.raise_on_rank == rank:
        raise RuntimeError(f"rank {rank} fails on purpose")
    if args.raise_on_rank is not None:
        # Cannot complete: the failed rank never joins. torchrun must end it.
        dist.all_reduce(t)
        torch.npu.synchronize()

    parts = [torch.empty(2, dtype=torch.int64, device=device) for _ in range(world)]
    dist.all_gather(parts, torch.tensor([rank, 10 * rank], device=device))
    all_gather = [p.cpu().tolist() for p in parts]

    b = torch.arange(4, dtype=torch.float32, device=device) + 100 * rank
    dist.broadcast(b, src=world - 1)
    broadcast = b.cpu().tolist()

    # Rank r sends 100 * r + d to rank d.
    a_in = torch.tensor([100 * rank + d for d in range(world)], dtype=torch.int32, device=device)
    a_out = torch.empty_like(a_in)
    dist.all_to_all_single(a_out, a_in)
    all_to_all = a_out.cpu().tolist()

    # DDP: rank r takes rows [r * per_rank, (r + 1) * per_rank) of each batch;
    # the gradients are averaged, so training equals the whole batch's.
    per_rank = BATCH // world
    mine = [(x[rank * per_rank:(rank + 1) * per_rank], y[rank * per_rank:(rank + 1) * per_rank])
            for x, y in batches()]
    model = DistributedDataParallel(make_model().to(device), device_ids=[local_rank])
    losses = train(model, mine, device)
    parameters = [p.detach().flatten().cpu().tolist() for p in model.module.parameters()]

    result = {
        "rank": rank, "world_size": world, "local_rank": local_rank,
        "device": str(torch.npu.current_device()), "backend": dist.get_backend(),
        "all_reduce": all_reduce, "all_gather": all_gather, "broadcast": broadcast,
        "all_to_all": all_to_all,
        "ddp_losses": losses, "ddp_parameters": parameters,
    }
    (args.out_dir / f"rank{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
