"""The simulator's stream race detector: a training step with it on vs off, side by side in one run.

    python benchmarks/race_detector.py

A small MLP trained on npu, a side stream computing a statistic of each
batch (ordered correctly, so the detector reports nothing). The detector
works on the launching thread, so the steps are queued back to back and
a trial synchronizes once at its end (a synchronize per step measured
mostly thread wake-ups on this loaded 2-core machine). Reported, with
the detector off and on and on / off (target <= 2x): ms per step to launch
the work (where the detector's cost is), and ms per step until the device
finished; the figures are the median of 9 trials that alternate between off and on.
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

    return step


def ms_per_step(step, race_check: bool) -> tuple[float, float]:
    """(ms per step to launch it, ms per step until the device finished)."""
    _race_check.set_enabled(race_check)
    step()  # warm-up (and the detector's first sight of the memory)
    torch.npu.synchronize()
    start = time.perf_counter()
    for _ in range(STEPS):
        step()
    launched = time.perf_counter() - start
    torch.npu.synchronize()
    elapsed = time.perf_counter() - start
    _race_check.set_enabled(False)
    return launched / STEPS * 1e3, elapsed / STEPS * 1e3


def main() -> None:
    print(f"{'':<24}{'launch ms/step':^30}{'step ms (launch + device)':^30}")
    print(f"{'model':<24}" + f"{'off':>10}{'on':>10}{'on/off':>10}" * 2)
    for width, depth, batch in [(64, 2, 32), (256, 4, 64), (1024, 4, 128)]:
        step = make_step(width, depth, batch)
        off, on = [], []
        for _ in range(TRIALS):
            off.append(ms_per_step(step, False))
            on.append(ms_per_step(step, True))
        row = f"mlp w={width} d={depth} b={batch}"
        line = f"{row:<24}"
        for column in range(2):
            off_ms = statistics.median(t[column] for t in off)
            on_ms = statistics.median(t[column] for t in on)
            line += f"{off_ms:>10.3f}{on_ms:>10.3f}{on_ms / off_ms:>9.2f}x"
        print(line)


if __name__ == "__main__":
    main()
