"""Where the device time of benchmarks/compile_npu.py's transformer training
step goes, eager vs compiled on npu, op by op.

Each device op (an aten op eagerly; an MLIR kernel, an extern matmul or an
optimizer op compiled) is timed with a pair of timing events around it on
its stream, over several steps; an op's time is its minimum over the steps
and the step's is the sum of those minimums. On a machine shared with
other work the wall-clock times of compile_npu.py swing by 30% and more
from run to run; these minimums move much less, and they say which kernels
cost more than the eager ops they replace. The time the device waits for
the host (and event overhead) is not in them: the same steps run again
without per-op events give the device's span per step (ops, idle time and
per-item overhead) and the wall time per step, so that the gap between the
op sum and the span shows in the same run.

    .venv/bin/python benchmarks/compile_npu_breakdown.py --mode {eager,compiled} [--steps N] [--top K]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import statistics
import sys
import time
from typing import Any, Callable

import torch
import torch_npu  # noqa: F401
from torch._inductor.select_algorithm import extern_kernels
from torch.utils._python_dispatch import TorchDispatchMode

from torch_npu.graph.compile import kernel as npu_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_npu import Block  # noqa: E402

_MATMULS = ("mm", "addmm", "bmm")


class _Recorder:
    """Event pairs around device ops, while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.pending: list[tuple[str, Any, Any]] = []

    def timed(self, label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not self.on:
            return fn(*args, **kwargs)
        start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
        start.record()
        result = fn(*args, **kwargs)
        end.record()
        self.pending.append((label, start, end))
        return result


class _AtenOps(TorchDispatchMode):
    def __init__(self, recorder: _Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return self.recorder.timed(str(func), func, *args, **(kwargs or {}))


def _instrument(recorder: _Recorder) -> None:
    run = npu_kernel.MLIRKernel.run

    def timed_run(self: Any, *args: Any, stream: int | None = None) -> None:
        recorder.timed(f"kernel {self.name}", run, self, *args, stream=stream)

    npu_kernel.MLIRKernel.run = timed_run
    for name in _MATMULS:
        fn = getattr(extern_kernels, name)
        setattr(extern_kernels, name,
                lambda *a, _fn=fn, _name=name, **k: recorder.timed(f"extern {_name}", _fn, *a, **k))


def _group(label: str) -> str:
    if label.startswith("extern") or any(f"aten.{m}." in label for m in _MATMULS):
        return "matmuls"
    return "kernels" if label.startswith("kernel") else "other ops"


def breakdown(compiled: bool, steps: int) -> tuple[list[tuple[str, float]], tuple[float, float]]:
    """(op, minimum device ms) for each device op of one training step, and
    the step's uninstrumented (wall ms, device span ms)."""
    recorder = _Recorder()
    _instrument(recorder)
    torch.manual_seed(0)
    model = Block().to("npu")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8, 64, 128, device="npu")
    run = torch.compile(model) if compiled else model

    def step() -> None:
        # Outside the timed steps no dispatch mode is entered: the mode's
        # Python call per op would make the uninstrumented steps host-bound.
        timed_ops = _AtenOps(recorder) if recorder.on else contextlib.nullcontext()
        opt.zero_grad(set_to_none=True)
        if compiled:
            # the compiled graphs' kernels are timed by their launches; a
            # dispatch mode around them would make Dynamo fall back to eager
            run(x).square().mean().backward()
            with timed_ops:
                opt.step()
        else:
            with timed_ops:
                run(x).square().mean().backward()
                opt.step()

    # Steps run untimed for 1.5 s first, as in compile_npu.py: after the
    # compiler's processes the runtime throttles the device threads' OpenMP
    # waits for a while (Note [OpenMP teams of the host and device threads],
    # core's csrc/npu/OpenMPThreads.h), and a compiled step timed right after
    # compiling ran its matmuls slower than the eager step's.
    warm_until = time.perf_counter() + 1.5
    while time.perf_counter() < warm_until:
        step()
    torch.npu.synchronize()
    best: list[tuple[str, float]] | None = None
    for _ in range(steps):
        recorder.pending.clear()
        recorder.on = True
        step()
        recorder.on = False
        torch.npu.synchronize()
        times = [(label, start.elapsed_time(end)) for label, start, end in recorder.pending]
        if best is not None and [label for label, _ in best] != [label for label, _ in times]:
            raise RuntimeError("the step ran different device ops in two iterations")
        best = times if best is None else [(label, min(a, b)) for (label, a), (_, b) in zip(best, times)]
    assert best is not None
    return best, _uninstrumented_step(step, steps)


def _uninstrumented_step(step: Callable[[], None], steps: int) -> tuple[float, float]:
    """(wall ms, device span ms) per step, medians over ``steps`` steps run
    back to back without per-op events: a timing event between steps marks
    where one step's device work ends and the next one's begins, so the span
    holds the op times plus the device's idle time and per-item overhead."""
    events = [torch.npu.Event(enable_timing=True) for _ in range(steps + 1)]
    torch.npu.synchronize()
    start = time.perf_counter()
    events[0].record()
    for i in range(steps):
        step()
        events[i + 1].record()
    torch.npu.synchronize()
    wall = (time.perf_counter() - start) * 1e3 / steps
    spans = [events[i].elapsed_time(events[i + 1]) for i in range(steps)]
    return wall, statistics.median(spans)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--mode", choices=("eager", "compiled"), required=True,
                        help="one mode per process: the instrumentation patches the kernels' launches")
    args = parser.parse_args()
    ops, (wall, span) = breakdown(args.mode == "compiled", args.steps)
    groups: dict[str, list[float]] = collections.defaultdict(list)
    per_op: dict[str, float] = collections.defaultdict(float)
    for label, ms in ops:
        groups[_group(label)].append(ms)
        per_op[label] += ms
    total = sum(ms for _, ms in ops)
    print(f"{args.mode}: {total:6.3f} ms of device ops per step (sum of per-op minimums over {args.steps} steps)")
    print(f"  uninstrumented step: device span {span:6.3f} ms (ops + idle + per-item overhead), wall {wall:6.3f} ms")
    for group, times in sorted(groups.items()):
        print(f"  {group:10s} {sum(times):6.3f} ms in {len(times)} ops")
    for label, ms in sorted(per_op.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"    {ms:6.3f} ms  {label}")


if __name__ == "__main__":
    main()
