"""Collectives between two processes: hccl on npu (the simulator) vs gloo on CPU, side by side.

    python benchmarks/collectives.py

Starts two ranks (npu:0 and npu:1, one process each) that hold both a hccl
group and a gloo group, and times `all_reduce` (sum, float32) and
`all_to_all_single` (even splits) at several sizes on each: gloo on CPU
tensors, hccl on npu tensors followed by `torch.npu.synchronize()`. Prints
time per call and the ratio hccl/gloo (below 1: hccl is faster). Each figure
is the median of 7 trials that alternate between the two backends.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

SIZES = [(1024, 400), (65536, 200), (1 << 20, 40), (16 << 20, 6)]  # floats, iterations
TRIALS = 7


def rank_main(rank: int, world: int, store: str) -> None:
    import torch
    import torch.distributed as dist

    import torch_npu

    torch.npu.set_device(rank)
    dist.init_process_group("hccl", init_method=f"file://{store}", rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    if rank == 0:
        print(f"torch {torch.__version__}, torch_npu {torch_npu.__version__}, 2 ranks, "
              f"{torch.get_num_threads()} CPU threads each, "
              f"NPU_SIM_CHECKER={os.environ.get('NPU_SIM_CHECKER', '')}")
    collectives = {
        "all_reduce": lambda t, out, group: dist.all_reduce(t, group=group),
        "all_to_all_single": lambda t, out, group: dist.all_to_all_single(out, t, group=group),
    }
    for collective, call in collectives.items():
        if rank == 0:
            print(f"{collective + ' float32':24s} {'gloo (cpu)':>12s} {'hccl (npu)':>12s} "
                  f"{'hccl/gloo time':>15s}")
        for numel, iterations in SIZES:
            cpu, cpu_out = torch.ones(numel), torch.empty(numel)
            npu, npu_out = torch.ones(numel).npu(), torch.empty(numel).npu()

            def run_gloo() -> None:
                for _ in range(iterations):
                    call(cpu, cpu_out, gloo)

            def run_hccl() -> None:
                for _ in range(iterations):
                    call(npu, npu_out, None)
                torch.npu.synchronize()

            run_gloo()
            run_hccl()  # warm-up: communicators, buffers, caches
            times: dict[str, list[float]] = {"gloo": [], "hccl": []}
            for _ in range(TRIALS):
                for name, fn in (("gloo", run_gloo), ("hccl", run_hccl)):
                    dist.barrier(group=gloo)  # both ranks start together
                    start = time.perf_counter()
                    fn()
                    times[name].append((time.perf_counter() - start) / iterations)
            gloo_t, hccl_t = statistics.median(times["gloo"]), statistics.median(times["hccl"])
            if rank == 0:
                size = (f"{numel * 4 / 1024:.0f} KiB" if numel * 4 < (1 << 20)
                        else f"{numel * 4 >> 20} MiB")
                print(f"{size:24s} {gloo_t * 1e6:10.1f}us {hccl_t * 1e6:10.1f}us "
                      f"{hccl_t / gloo_t:15.2f}")
    dist.destroy_process_group()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "2", store])
                 for r in range(2)]
        codes = [p.wait() for p in procs]
    if any(codes):
        sys.exit(f"a rank failed (exit codes {codes})")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        main()
