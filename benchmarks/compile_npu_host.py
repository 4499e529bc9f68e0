"""Where the host time of benchmarks/compile_npu.py's transformer training
step goes, eager vs compiled on npu: the time the Python thread takes to
enqueue each part of a step, the device idle when the step starts.

A step is timed in pieces (zero_grad, forward, loss, backward, optimizer
step); for the compiled model also the Inductor code's own calls
(``call(args)`` of the forward and of the backward graph: kernel launches,
allocations, extern matmuls), the rest of its forward and backward being
Dynamo's guards and AOTAutograd's runtime wrappers. The device is
synchronised after every step, so a launch never waits for a full queue;
each number is the median over the steps. Eager and compiled steps
alternate, so both see the same machine.

    .venv/bin/python benchmarks/compile_npu_host.py [--seconds S]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from typing import Any, Callable

import torch
import torch_npu  # noqa: F401
from torch._inductor import output_code

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_npu import Block  # noqa: E402


class _InductorCalls:
    """Seconds spent in Inductor's compiled code per graph while ``on``: the
    forward runs on the calling thread, the backward on autograd's."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._call = output_code.CompiledFxGraph.__call__

    def __enter__(self) -> _InductorCalls:
        call, seconds = self._call, self.seconds

        def timed(graph: Any, inputs: Any) -> Any:
            start = time.perf_counter()
            try:
                return call(graph, inputs)
            finally:
                main = threading.current_thread() is threading.main_thread()
                key = "inductor call() fwd" if main else "inductor call() bwd"
                seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - start

        output_code.CompiledFxGraph.__call__ = timed
        return self

    def __exit__(self, *exc: Any) -> None:
        output_code.CompiledFxGraph.__call__ = self._call


def _step(model: Callable[..., torch.Tensor], opt: torch.optim.Optimizer, x: torch.Tensor,
          record: dict[str, list[float]]) -> None:
    marks = [time.perf_counter()]
    opt.zero_grad(set_to_none=True)
    marks.append(time.perf_counter())
    y = model(x)
    marks.append(time.perf_counter())
    loss = y.square().mean()
    marks.append(time.perf_counter())
    loss.backward()
    marks.append(time.perf_counter())
    opt.step()
    marks.append(time.perf_counter())
    for name, start, end in zip(("zero_grad", "forward", "loss", "backward", "opt.step"), marks, marks[1:]):
        record.setdefault(name, []).append(end - start)
    record.setdefault("step", []).append(marks[-1] - marks[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="time spent measuring")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = Block().to("npu")
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8, 64, 128, device="npu")
    models = {"eager": model, "compiled": torch.compile(model)}
    records: dict[str, dict[str, list[float]]] = {name: {} for name in models}
    with _InductorCalls() as inductor:
        # Compiles, then lets the device threads' OpenMP waits spin again
        # (see compile_npu.training).
        warm_until = time.perf_counter() + 1.5
        while time.perf_counter() < warm_until:
            for m in models.values():
                _step(m, opt, x, {})
        torch.npu.synchronize()
        end = time.perf_counter() + args.seconds
        while time.perf_counter() < end:
            for name, m in models.items():
                inductor.seconds.clear()
                _step(m, opt, x, records[name])
                for key, seconds in inductor.seconds.items():
                    records[name].setdefault(key, []).append(seconds)
                torch.npu.synchronize()
    print("host time per training step, us (median; device idle at each step's start)")
    for name, record in records.items():
        print(f"  {name} ({len(record['step'])} steps)")
        for key, values in record.items():
            print(f"    {key:22s} {statistics.median(values) * 1e6:8.0f}")


if __name__ == "__main__":
    main()
