"""Profiler overhead: a small-GPT training step (benchmarks/ops_throughput.py's)
without a profiler and under torch_npu.profiler at Level0 and Level1, side by
side in one run.

    python benchmarks/profiler_overhead.py [--quick]

Each trial runs the same number of steps in every mode (the order of the modes
rotates from trial to trial); a profiled trial records all its steps
(activities CPU+NPU, schedule(wait=0, active=steps, repeat=1), the handler
writing into a temporary directory). Reported per mode: the median step time
over the trials, its ratio to the unprofiled one (target <= 1.10 at Level0),
the process CPU time per step and its ratio (steadier than wall time on a
loaded machine: the simulated device's work is host CPU work, the same in
every mode, and the profiler's cost is CPU work too), the time the handler
took to write a result (raw data plus
ASCEND_PROFILER_OUTPUT; not part of the step time) and the output bytes per
profiled step.
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
from torch_npu.profiler import (ProfilerActivity, ProfilerLevel, _ExperimentalConfig, profile, schedule,
                                tensorboard_trace_handler)

MODES = ("off", "Level0", "Level1")


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run_mode(mode: str, step, steps: int, out: Path) -> tuple[float, float, float, int]:
    """Seconds per step (wall and process CPU), seconds to write the result,
    result bytes."""
    if mode == "off":
        torch.npu.synchronize()
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        torch.npu.synchronize()
        return (time.perf_counter() - start) / steps, (time.process_time() - cpu) / steps, 0.0, 0
    config = _ExperimentalConfig(profiler_level=ProfilerLevel[mode])
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU],
                   schedule=schedule(wait=0, active=steps, repeat=1),
                   on_trace_ready=tensorboard_trace_handler(out), experimental_config=config)
    torch.npu.synchronize()
    prof.start()
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(steps):
        step()
        if i < steps - 1:
            prof.step()
    torch.npu.synchronize()
    per_step, cpu_per_step = (time.perf_counter() - start) / steps, (time.process_time() - cpu) / steps
    start = time.perf_counter()
    prof.stop()  # ends the last active step: the handler writes the result
    write = time.perf_counter() - start
    return per_step, cpu_per_step, write, dir_bytes(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    trials, steps = (3, 5) if args.quick else (7, 10)
    step = gpt_step("npu")
    for _ in range(3):  # warm up the model and the profiler's first use
        step()
    with profile(schedule=schedule(wait=0, active=1, repeat=1)) as prof:
        step()
        prof.step()
    times = {mode: [] for mode in MODES}
    cpu_times = {mode: [] for mode in MODES}
    writes = {mode: [] for mode in MODES}
    sizes = {mode: [] for mode in MODES}
    for trial in range(trials):
        order = MODES[trial % len(MODES):] + MODES[:trial % len(MODES)]
        for mode in order:
            out = Path(tempfile.mkdtemp(prefix="profiler_overhead_"))
            try:
                per_step, cpu_per_step, write, size = run_mode(mode, step, steps, out)
            finally:
                shutil.rmtree(out, ignore_errors=True)
            times[mode].append(per_step)
            cpu_times[mode].append(cpu_per_step)
            writes[mode].append(write)
            sizes[mode].append(size / steps)
    base, cpu_base = statistics.median(times["off"]), statistics.median(cpu_times["off"])
    print(f"small-GPT train step, {trials} trials x {steps} steps, cpu count {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'mode':<8}{'wall/step':>11}{'ratio':>7}{'cpu/step':>11}{'ratio':>7}{'write':>9}{'bytes/step':>12}")
    for mode in MODES:
        t, c = statistics.median(times[mode]), statistics.median(cpu_times[mode])
        target = "  target <= 1.10" if mode == "Level0" else ""
        write = f"{statistics.median(writes[mode]) * 1e3:.0f}ms" if mode != "off" else "-"
        size = f"{statistics.median(sizes[mode]) / 1024:.1f}KiB" if mode != "off" else "-"
        print(f"{mode:<8}{t * 1e3:>9.2f}ms{t / base:>7.2f}{c * 1e3:>9.2f}ms{c / cpu_base:>7.2f}{write:>9}{size:>12}"
              f"{target}")
    spread = [b / a for a, b in zip(times["off"], times["Level0"])]
    print(f"Level0/off per trial: {', '.join(f'{r:.2f}' for r in spread)}")


if __name__ == "__main__":
    main()
