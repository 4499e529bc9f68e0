"""What mstx calls and torch.profiler's npu activity cost, side by side in one run.

    python benchmarks/profiling_overhead.py

- mstx while nothing records (Note [mstx records]): a mark, a range_start /
  range_end pair and a pair on a stream, against a Python function that does
  nothing (the floor of any Python call).
- A step of 50 small npu ops (a + b, 4096 floats, then a synchronisation):
  no profiler, torch.profiler with CPU activity only, and with
  ProfilerActivity.PrivateUse1 (Note [NPU activity in torch.profiler]: the
  device records and the correlation ids pushed around every op).

Each figure is the median of 9 trials; trials alternate between the variants.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

import torch_npu  # noqa: F401

TRIALS = 9


def per_call_ns(fn: Callable[[], None], calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - start) / calls


def compare(variants: dict[str, Callable[[], float]]) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(TRIALS):
        for name, run in variants.items():
            samples[name].append(run())
    return {name: statistics.median(values) for name, values in samples.items()}


def mstx_off() -> None:
    mstx = torch.npu.mstx
    stream = torch.npu.current_stream()

    def nothing() -> None:
        pass

    def pair() -> None:
        mstx.range_end(mstx.range_start("step"))

    def stream_pair() -> None:
        mstx.range_end(mstx.range_start("step", stream=stream))

    calls = 20000
    medians = compare({
        "empty Python function": lambda: per_call_ns(nothing, calls),
        "mstx.mark": lambda: per_call_ns(lambda: mstx.mark("m"), calls),
        "range_start + range_end": lambda: per_call_ns(pair, calls),
        "the same, on a stream": lambda: per_call_ns(stream_pair, calls),
    })
    floor = medians["empty Python function"]
    print("mstx while nothing records (ns per call, and / empty function):")
    for name, ns in medians.items():
        print(f"  {name:26s} {ns:8.0f} ns  {ns / floor:5.1f}x")


def profiled_steps() -> None:
    a = torch.randn(4096, device="npu")
    b = torch.randn(4096, device="npu")

    def step() -> None:
        for _ in range(50):
            a + b
        torch.npu.synchronize()

    def timed(activities) -> float:
        start = time.perf_counter_ns()
        if activities is None:
            for _ in range(20):
                step()
        else:
            with profile(activities=activities):
                for _ in range(20):
                    step()
        return (time.perf_counter_ns() - start) / 20

    step()
    medians = compare({
        "no profiler": lambda: timed(None),
        "CPU activity": lambda: timed([ProfilerActivity.CPU]),
        "CPU + PrivateUse1": lambda: timed([ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]),
    })
    base = medians["no profiler"]
    print("a step of 50 small npu ops (us per step, and / no profiler; includes the trace's processing):")
    for name, ns in medians.items():
        print(f"  {name:26s} {ns / 1000:8.1f} us  {ns / base:5.2f}x")


if __name__ == "__main__":
    mstx_off()
    profiled_steps()
