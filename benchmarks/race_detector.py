"""The simulator's stream race detector: a training step with it on vs off, side by side in one run.

    python benchmarks/race_detector.py

A small MLP trained on npu, a side stream computing a statistic of each
batch (ordered correctly, so the detector reports nothing). Each step ends
with a synchronize, so a figure is the step's whole device time. Reported:
ms per step with the detector off and on, and on / off (target <= 2x);
the figures are the median of 9 trials that alternate between off and on.
"Off" is the default state: its cost is one relaxed load per launch, below
what this run can measure (compare with ops_throughput.py on main).
"""

from __future__ import annotations

import statistics
import time

import torch

import torch_npu  # noqa: F401
from torch_npu.npu import _race_check

STEPS = 20
# Kernels on one thread each: intra-op threads contending for a loaded
# machine made the figures swing by 2x between runs.
torch.set_num_threads(1)
TRIALS = 9


def make_step(width: int, depth: int, batch: int):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10)).npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    side = torch.npu.Stream()
    main = torch.npu.current_stream()
    x = torch.randn(batch, width, device="npu")
    target = torch.randn(batch, 10, device="npu")

    def step():
        side.wait_stream(main)
        with torch.npu.stream(side):
            scale = x.abs().mean()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        main.wait_stream(side)
        with torch.no_grad():
            for p in model.parameters():
                p.grad.mul_(scale.clamp(max=1.0))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.npu.synchronize()

    return step


def ms_per_step(step, race_check: bool) -> float:
    _race_check.set_enabled(race_check)
    step()  # warm-up (and the detector's first sight of the memory)
    start = time.perf_counter()
    for _ in range(STEPS):
        step()
    elapsed = time.perf_counter() - start
    _race_check.set_enabled(False)
    return elapsed / STEPS * 1e3


def main() -> None:
    print(f"{'model':<28}{'off ms/step':>13}{'on ms/step':>13}{'on/off':>9}")
    for width, depth, batch in [(64, 2, 32), (256, 4, 64), (1024, 4, 128)]:
        step = make_step(width, depth, batch)
        off, on = [], []
        for _ in range(TRIALS):
            off.append(ms_per_step(step, False))
            on.append(ms_per_step(step, True))
        off_ms, on_ms = statistics.median(off), statistics.median(on)
        name = f"mlp w={width} d={depth} b={batch}"
        print(f"{name:<28}{off_ms:>13.3f}{on_ms:>13.3f}{on_ms / off_ms:>8.2f}x")


if __name__ == "__main__":
    main()
