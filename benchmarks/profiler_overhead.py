"""Profiler overhead: a small-GPT training step (benchmarks/ops_throughput.py's)
without a profiler and under torch_npu.profiler at Level0 and Level1, side by
side in one run.

    python benchmarks/profiler_overhead.py [--quick]

Per level, one profile (activities CPU+NPU, ``schedule(wait=2, active=1)``, the
handler writing into a temporary directory) alternates unprofiled and profiled
steps, so each profiled step has an unprofiled neighbour measured moments
before it: on a loaded machine, slow phases hit both. The first unprofiled
step after a result was written is not timed: it pays for the writing's
aftermath (collecting the result's Python objects); in runs on this machine
those steps were often several times slower than the others. Each step is timed on
its own (wall time and process CPU time, synchronized), without the profiler's
start/stop between steps and without the handler's writing, which are
reported apart: the time to write one result (raw data plus
ASCEND_PROFILER_OUTPUT, after data_simplification) and its bytes per profiled
step. Reported ratios: median profiled step / median unprofiled step, and the
median of the per-pair ratios (target <= 1.10 at Level0); the same for the
process's CPU time and for the CPU time of the training (host) thread alone.
The last one is what the profiler adds to each op's dispatch, and the one
that stays readable on a machine shared with other jobs: wall time there
swings by several times from step to step, the process's CPU time with the
simulator's worker threads spinning longer while they wait for a CPU.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

import torch_npu  # noqa: F401
from ops_throughput import gpt_step
from torch.profiler import ProfilerAction
from torch_npu.profiler import (ProfilerActivity, ProfilerLevel, _ExperimentalConfig, profile, schedule,
                                tensorboard_trace_handler)


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def measure(level: str, step, pairs: int) -> dict[str, list[float]]:
    out = Path(tempfile.mkdtemp(prefix="profiler_overhead_"))
    write = tensorboard_trace_handler(out)
    results: dict[str, list[float]] = {"off": [], "on": [], "off_cpu": [], "on_cpu": [], "off_thread": [],
                                       "on_thread": [], "write": [], "bytes": []}

    def handler(prof):
        before = dir_bytes(out)
        start = time.perf_counter()
        write(prof)
        results["write"].append(time.perf_counter() - start)
        results["bytes"].append(dir_bytes(out) - before)

    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU], schedule=schedule(wait=2, active=1),
                   on_trace_ready=handler,
                   experimental_config=_ExperimentalConfig(profiler_level=ProfilerLevel[level]))
    try:
        prof.start()
        for index in range(3 * pairs):
            profiled = prof.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
            if index % 3 == 0:  # the step after a write (or the first): untimed
                step()
                prof.step()
                continue
            torch.npu.synchronize()
            start, cpu, thread = time.perf_counter(), time.process_time(), time.thread_time()
            step()
            torch.npu.synchronize()
            key = "on" if profiled else "off"
            results[key].append(time.perf_counter() - start)
            results[key + "_cpu"].append(time.process_time() - cpu)
            results[key + "_thread"].append(time.thread_time() - thread)
            prof.step()
        prof.stop()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    pairs = 4 if args.quick else 12
    step = gpt_step("npu")
    for _ in range(3):  # warm up the model and the profiler's first use
        step()
    measure("Level0", step, 1)
    print(f"small-GPT train step, {pairs} unprofiled/profiled step pairs per level, cpu count {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'level':<8}{'off':>10}{'on':>10}{'ratio':>7}{'pairs':>7}{'cpu ratio':>11}{'thread cpu':>12}"
          f"{'write':>9}{'bytes/step':>12}")
    for level in ("Level0", "Level1"):
        r = measure(level, step, pairs)
        off, on = statistics.median(r["off"]), statistics.median(r["on"])
        pair_ratio = statistics.median(b / a for a, b in zip(r["off"], r["on"]))
        cpu_ratio = statistics.median(r["on_cpu"]) / statistics.median(r["off_cpu"])
        thread_ratio = statistics.median(b / a for a, b in zip(r["off_thread"], r["on_thread"]))
        target = "  target <= 1.10" if level == "Level0" else ""
        print(f"{level:<8}{off * 1e3:>8.1f}ms{on * 1e3:>8.1f}ms{on / off:>7.2f}{pair_ratio:>7.2f}{cpu_ratio:>11.2f}"
              f"{thread_ratio:>12.2f}{statistics.median(r['write']) * 1e3:>7.0f}ms{statistics.median(r['bytes']) / 1024:>9.1f}KiB{target}")


if __name__ == "__main__":
    main()
