"""NPUGraph replay vs issuing the same work eagerly, on npu (and CPU for scale).

    python benchmarks/npugraph_replay.py [--quick]

Two workloads, each timed eagerly on CPU, eagerly on npu and as a replay of
an npu graph captured once (torch.npu.graph), in one run, best of several
rounds (the machine is shared; the best round is the least disturbed):

- 100 small ops: a chain of 100 pointwise ops on a 64-element tensor; the
  host's cost per op (dispatch, allocation, launch) is all there is, which a
  replay does not pay. Target: replay >= 5x faster than eager npu.
- a small training step: forward, backward and SGD step of a 3-layer MLP on
  a batch of 32 x 64, captured whole (loss.backward() and opt.step() inside
  the capture).

Each timing includes a synchronisation at the end of every round, so queued
device work is counted.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

import torch_npu  # noqa: F401


def best_time(fn: Callable[[], None], sync: Callable[[], None], iters: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        sync()
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / iters)
    return best


def small_ops(x: torch.Tensor) -> torch.Tensor:
    for i in range(25):
        x = x * 1.0001
        x = x + 0.5
        x = torch.relu(x)
        x = x - (0.25 + i * 1e-3)
    return x


def mlp(device: str) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10)).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
    return loss


def captured(fn: Callable[[], object]) -> torch.npu.NPUGraph:
    # Warm up on a side stream (lazy state, gradients) before capturing.
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        for _ in range(2):
            fn()
    torch.npu.current_stream().wait_stream(side)
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        fn()
    return graph


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    args = parser.parse_args()
    iters, rounds = (50, 3) if args.quick else (200, 5)
    cpu_sync = lambda: None  # noqa: E731
    npu_sync = torch.npu.synchronize

    rows = []
    x_cpu = torch.randn(64)
    x_npu = x_cpu.npu()
    cpu = best_time(lambda: small_ops(x_cpu), cpu_sync, iters, rounds)
    eager = best_time(lambda: small_ops(x_npu), npu_sync, iters, rounds)
    graph = captured(lambda: small_ops(x_npu))
    replay = best_time(graph.replay, npu_sync, iters, rounds)
    rows.append(("100 small ops", cpu, eager, replay, 5.0))

    xb, yb = torch.randn(32, 64), torch.randint(0, 10, (32,))
    model_cpu, opt_cpu = mlp("cpu")
    model_npu, opt_npu = mlp("npu")
    x_npu, y_npu = xb.npu(), yb.npu()
    cpu = best_time(lambda: train_step(model_cpu, opt_cpu, xb, yb), cpu_sync, iters // 4, rounds)
    eager = best_time(lambda: train_step(model_npu, opt_npu, x_npu, y_npu), npu_sync, iters // 4, rounds)
    graph = captured(lambda: train_step(model_npu, opt_npu, x_npu, y_npu))
    replay = best_time(graph.replay, npu_sync, iters // 4, rounds)
    rows.append(("MLP training step", cpu, eager, replay, None))

    print(f"{'workload':<20}{'cpu eager':>12}{'npu eager':>12}{'npu replay':>12}"
          f"{'eager/replay':>14}  target")
    for name, cpu_t, eager_t, replay_t, target in rows:
        speedup = eager_t / replay_t
        verdict = "" if target is None else f">= {target:g}x {'ok' if speedup >= target else 'MISSED'}"
        print(f"{name:<20}{cpu_t * 1e6:>10.1f}us{eager_t * 1e6:>10.1f}us{replay_t * 1e6:>10.1f}us"
              f"{speedup:>13.2f}x  {verdict}")


if __name__ == "__main__":
    main()
