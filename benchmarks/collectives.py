"""Collectives between processes: hccl on npu (the simulator) vs gloo on CPU, side by side.

    python benchmarks/collectives.py [--ranks 2] [--max-bytes 4096] [--only all_reduce]
                                     [--machines 2]

Starts the ranks (npu:r, one process each) that hold both a hccl group and a
gloo group, and times `all_reduce` (sum, float32), `all_gather_into_tensor`,
`reduce_scatter_tensor` (sum) and `all_to_all_single` (even splits) from
4 KiB to 256 MiB on each: gloo on CPU tensors, hccl on npu tensors followed
by `torch.npu.synchronize()`. Prints time per call and the ratio hccl/gloo
(below 1: hccl is faster), then the bus bandwidth of each (as nccl-tests
defines it: a row's bytes over the time, times 2(n-1)/n for all_reduce and
(n-1)/n for the others, so that it compares with the bandwidth of one link)
beside a host memcpy of the same bytes, which every rank runs at the same
time, and the ratio hccl bus bandwidth / memcpy. Each figure is the median
of 7 trials that alternate between gloo, hccl and the memcpy.

The memcpy is an npu-to-npu copy (`Tensor.copy_`), which the simulator runs
as one host memcpy on one thread, as its HCCL moves data: it copies between
buffers of the kind the collectives use, warm. The ranks get the variables
torchrun sets (WORLD_SIZE and so on), so their device memory is shared
memory their peers map (NPU_SIM_DEVICE_HEAP=shared: 4 KiB pages, Note
[Device heap kind]); with NPU_SIM_DEVICE_HEAP=private it is transparent
huge pages, which copy faster at 256 MiB, and HCCL reads it with
cross-memory attach. A copy between CPU tensors (4 KiB pages) took 1.3 times as
long at 256 MiB (1.1 at 64 MiB) here with two ranks copying at once, which
flattered hccl's ratio.

With `--machines M`, rank r claims machine r % M (NPU_SIM_HOST_ID, over
127.0.0.1): for M > 1 the simulated HCCL joins the ranks over TCP (Note
[Socket transport]) instead of shared memory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

# float32 elements (4 KiB to 256 MiB), iterations per trial
SIZES = [(1024, 400), (65536, 200), (1 << 20, 40), (16 << 20, 6), (64 << 20, 2)]
TRIALS = 7


# Bus bandwidth over algorithm bandwidth (bytes / time), with n ranks. The
# bytes are a row's size: the tensor of all_reduce and all_to_all, the
# output of all_gather, the input of reduce_scatter (as nccl-tests counts).
BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather_into_tensor": lambda n: (n - 1) / n,
    "reduce_scatter_tensor": lambda n: (n - 1) / n,
    "all_to_all_single": lambda n: (n - 1) / n,
}


def rank_main(rank: int, world: int, store: str, max_bytes: int, only: list[str]) -> None:
    import torch
    import torch.distributed as dist

    import torch_npu

    # torch's renamings of the collectives (reduce_scatter_tensor and so on).
    warnings.filterwarnings("ignore", category=FutureWarning)
    torch.npu.set_device(rank)
    dist.init_process_group("hccl", init_method=f"file://{store}", rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    if rank == 0:
        print(f"torch {torch.__version__}, torch_npu {torch_npu.__version__}, {world} ranks, "
              f"{torch.get_num_threads()} CPU threads each, {os.cpu_count()} CPUs, "
              f"NPU_SIM_CHECKER={os.environ.get('NPU_SIM_CHECKER', '')}")
    # (call, input elements, output elements) for a row of `numel` elements.
    collectives = {
        "all_reduce": (lambda t, out, group: dist.all_reduce(t, group=group),
                       lambda numel: (numel, numel)),
        "all_gather_into_tensor": (
            lambda t, out, group: dist.all_gather_into_tensor(out, t, group=group),
            lambda numel: (numel // world, numel)),
        "reduce_scatter_tensor": (
            lambda t, out, group: dist.reduce_scatter_tensor(out, t, group=group),
            lambda numel: (numel, numel // world)),
        "all_to_all_single": (lambda t, out, group: dist.all_to_all_single(out, t, group=group),
                              lambda numel: (numel, numel)),
    }
    if only:
        collectives = {name: collectives[name] for name in only}
    bandwidths: list[str] = []  # the second table's rows, printed after the first
    for collective, (call, shapes) in collectives.items():
        if rank == 0:
            print(f"{collective + ' float32':34s} {'gloo (cpu)':>12s} {'hccl (npu)':>12s} "
                  f"{'hccl/gloo time':>15s}")
            bandwidths.append(f"{collective + ' bus GB/s':34s} {'gloo (cpu)':>12s} "
                              f"{'hccl (npu)':>12s} {'host memcpy':>12s} {'hccl/memcpy':>12s}")
        for numel, iterations in SIZES:
            if numel * 4 > max_bytes:
                continue
            numel -= numel % world  # divisible among the ranks
            n_in, n_out = shapes(numel)
            cpu, cpu_out = torch.ones(n_in), torch.empty(n_out)
            npu, npu_out = torch.ones(n_in).npu(), torch.empty(n_out).npu()
            src, dst = torch.ones(numel).npu(), torch.empty(numel).npu()

            def run_gloo() -> None:
                for _ in range(iterations):
                    call(cpu, cpu_out, gloo)

            def run_hccl() -> None:
                for _ in range(iterations):
                    call(npu, npu_out, None)
                torch.npu.synchronize()

            def run_memcpy() -> None:
                for _ in range(iterations):
                    dst.copy_(src)
                torch.npu.synchronize()

            run_gloo()
            run_hccl()  # warm-up: communicators, buffers, caches
            run_memcpy()
            runs = (("gloo", run_gloo), ("hccl", run_hccl), ("memcpy", run_memcpy))
            times: dict[str, list[float]] = {name: [] for name, _ in runs}
            for _ in range(TRIALS):
                for name, fn in runs:
                    dist.barrier(group=gloo)  # all ranks start together
                    start = time.perf_counter()
                    fn()
                    times[name].append((time.perf_counter() - start) / iterations)
            gloo_t, hccl_t, memcpy_t = (statistics.median(times[name]) for name, _ in runs)
            if rank == 0:
                size = (f"{numel * 4 / 1024:.0f} KiB" if numel * 4 < (1 << 20)
                        else f"{numel * 4 >> 20} MiB")
                print(f"{size:34s} {gloo_t * 1e6:10.1f}us {hccl_t * 1e6:10.1f}us "
                      f"{hccl_t / gloo_t:15.2f}")
                gigabytes = numel * 4 / 1e9
                bus_gigabytes = BUS_FACTOR[collective](world) * gigabytes
                hccl_bw, memcpy_bw = bus_gigabytes / hccl_t, gigabytes / memcpy_t
                bandwidths.append(f"{size:34s} {bus_gigabytes / gloo_t:12.2f} {hccl_bw:12.2f} "
                                  f"{memcpy_bw:12.2f} {hccl_bw / memcpy_bw:12.2f}")
    if rank == 0:
        print("\n".join(bandwidths))
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2, help="processes (npu:0 ... npu:N-1)")
    parser.add_argument("--max-bytes", type=int, default=SIZES[-1][0] * 4,
                        help="skip rows larger than this many bytes (4096: latency only)")
    parser.add_argument("--only", nargs="+", choices=list(BUS_FACTOR), default=[],
                        help="run only these collectives")
    parser.add_argument("--machines", type=int, default=1,
                        help="machines the ranks claim to run on (more than 1: HCCL over TCP)")
    args = parser.parse_args()

    def rank_env(rank: int) -> dict[str, str]:
        # What torchrun tells its ranks; the simulator then gives each rank
        # device memory its peers can map (Note [Device heap kind]).
        launcher = {"RANK": str(rank), "WORLD_SIZE": str(args.ranks),
                    "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(args.ranks)}
        if args.machines <= 1:
            return {**os.environ, **launcher}
        return {**os.environ, **launcher, "NPU_SIM_HOST_ID": f"machine-{rank % args.machines}",
                "HCCL_IF_IP": "127.0.0.1"}

    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), str(args.ranks),
                                   store, str(args.max_bytes), ",".join(args.only)],
                                  env=rank_env(r))
                 for r in range(args.ranks)]
        codes = [p.wait() for p in procs]
    if any(codes):
        sys.exit(f"a rank failed (exit codes {codes})")


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]),
                  [name for name in sys.argv[6].split(",") if name])
    else:
        main()
