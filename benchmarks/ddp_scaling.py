"""A DDP training step on npu: 2 ranks vs 1 rank, the same batch per rank.

    python benchmarks/ddp_scaling.py [--steps 10] [--trials 5] [--batch 64]

Starts two processes (npu:0 and npu:1) joined by a hccl group, which also
hold a hccl group of rank 0 alone. Each trial times, one after the other in
the same processes:

- 1 rank: DDP over the group of rank 0 alone (rank 1 waits);
- 2 ranks, no all-reduce: both ranks step with `no_sync()` (DDP skips the
  gradient all-reduce), which separates the cost of two ranks sharing the
  machine from the cost of communication;
- 2 ranks: DDP over both, gradients all-reduced.

A step is forward, backward and SGD of a 3-layer MLP, then
`torch.npu.synchronize()`. Prints the median step time of each, samples per
second, and the weak-scaling efficiency: throughput with 2 ranks over twice
the throughput with 1 (1.0 is perfect; the step time ratio t1 / t2).
Two ranks need two free CPUs (each simulated device runs its work on a
thread beside its host thread): on a smaller or busy machine the figures
say more about the machine than about DDP.

The ranks run with OMP_NUM_THREADS=1 unless it is set, as torchrun starts
more than one process per node (each rank then uses one intra-op thread,
the 1-rank row included, so that the rows compare the same per-rank
resources). With several intra-op threads per rank on a machine with fewer
free CPUs than busy threads, OpenMP's worker threads spin after every
parallel region and take the CPU from the threads the all-reduce waits for:
on 2 CPUs, 2 threads per rank made the all-reduce cost about 16 ms per
step instead of a few.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HIDDEN = 1024
FEATURES = 256


def rank_main(rank: int, store: str, steps: int, trials: int, batch: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    import torch_npu

    torch.npu.set_device(rank)
    device = f"npu:{rank}"
    dist.init_process_group("hccl", init_method=f"file://{store}", rank=rank, world_size=2)
    gloo = dist.new_group(backend="gloo")  # host-side barriers between trials
    alone = dist.new_group([0], backend="hccl")  # every rank must call new_group

    def make_model(group: dist.ProcessGroup) -> DistributedDataParallel:
        torch.manual_seed(0)
        mlp = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
                                  torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
                                  torch.nn.Linear(HIDDEN, FEATURES))
        return DistributedDataParallel(mlp.to(device), process_group=group)

    x = torch.randn(batch, FEATURES, device=device)
    y = torch.randn(batch, FEATURES, device=device)
    models = {"1 rank": make_model(alone) if rank == 0 else None,
              "2 ranks, no all-reduce": make_model(dist.group.WORLD),
              "2 ranks": make_model(dist.group.WORLD)}
    optimizers = {name: torch.optim.SGD(m.parameters(), lr=1e-3)
                  for name, m in models.items() if m is not None}

    def run(name: str, count: int) -> float:
        """Seconds per step of `count` steps, or 0 on a rank that sits out."""
        model = models[name]
        dist.barrier(group=gloo)
        if model is None:
            dist.barrier(group=gloo)
            return 0.0
        start = time.perf_counter()
        for _ in range(count):
            optimizers[name].zero_grad()
            if name == "2 ranks, no all-reduce":
                with model.no_sync():
                    torch.nn.functional.mse_loss(model(x), y).backward()
            else:
                torch.nn.functional.mse_loss(model(x), y).backward()
            optimizers[name].step()
        torch.npu.synchronize()
        elapsed = (time.perf_counter() - start) / count
        if name == "1 rank":
            dist.barrier(group=gloo)
        return elapsed

    for name in models:
        run(name, 2)  # warm-up: communicators, DDP buckets, allocator, kernels
    times: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(trials):
        for name in models:
            times[name].append(run(name, steps))

    if rank == 0:
        params = sum(p.numel() for p in models["2 ranks"].parameters())
        print(f"torch {torch.__version__}, torch_npu {torch_npu.__version__}, "
              f"{os.cpu_count()} CPUs (shared with other users: the machine's load "
              f"moves these numbers), {torch.get_num_threads()} intra-op thread(s) per rank, "
              f"NPU_SIM_CHECKER={os.environ.get('NPU_SIM_CHECKER', '')}")
        print(f"MLP {FEATURES}-{HIDDEN}-{HIDDEN}-{FEATURES} ({params / 1e6:.2f} M parameters, "
              f"{params * 4 / 2**20:.1f} MiB of gradients), batch {batch} per rank, SGD; "
              f"median of {trials} trials of {steps} steps")
        print(f"{'':24s} {'step time':>12s} {'samples/s':>12s}")
        medians = {name: statistics.median(t) for name, t in times.items()}
        for name, seconds in medians.items():
            ranks = 1 if name == "1 rank" else 2
            print(f"{name:24s} {seconds * 1e3:10.2f}ms {ranks * batch / seconds:12.0f}")
        one, two = medians["1 rank"], medians["2 ranks"]
        print(f"scaling efficiency, 2 ranks vs 1 (t1 / t2): {one / two:.2f}")
        print(f"  of which sharing the machine (t1 / t2 without all-reduce): "
              f"{one / medians['2 ranks, no all-reduce']:.2f}")
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="steps per trial")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    args = parser.parse_args()
    # What torchrun does for more than one process per node (see above).
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), store,
                                   str(args.steps), str(args.trials), str(args.batch)], env=env)
                 for r in range(2)]
        codes = [p.wait() for p in procs]
    if any(codes):
        sys.exit(f"a rank failed (exit codes {codes})")


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]), sys.argv[3], *map(int, sys.argv[4:]))
    else:
        main()
