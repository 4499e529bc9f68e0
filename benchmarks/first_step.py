"""The first training step of a process on npu vs CPU (warm-up costs).

    python benchmarks/first_step.py

Each figure is measured in a fresh process: import torch and torch_npu,
build a small CNN with a loss (convolution, pooling, cross entropy: ops
whose shapes come from torch's Python meta kernels on npu), move it to the
device, spend some time as a training script does before its first step
(building the optimizer and the data loader), then time the first forward +
backward. The first op on npu starts, in the background, the imports that
torch's Python meta kernels make on their first call (sympy, torch._dynamo:
~1.4 s), and runs ops synchronously until they are done (Note [Python meta
kernels and the first op], packages/ops/csrc/PythonMetaWarmup.h); the idle
time (1.5 s, then 0 s) does not matter for it. Target: the first step on
npu takes <= 100 ms more than on the CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys

CODE = """
import json, sys, time
import torch, torch_npu
device, idle = sys.argv[1], float(sys.argv[2])
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(8 * 7 * 7, 10)).to(device)
x, y = torch.randn(4, 3, 16, 16), torch.tensor([0, 1, 2, 3])
time.sleep(idle)
start = time.perf_counter()
loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
loss.backward()
if device == "npu":
    torch.npu.synchronize()
first = time.perf_counter() - start
start = time.perf_counter()
loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
loss.backward()
if device == "npu":
    torch.npu.synchronize()
print(json.dumps({"first": first, "second": time.perf_counter() - start}))
"""


def measure(device: str, idle: float) -> dict:
    out = subprocess.run([sys.executable, "-c", CODE, device, str(idle)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    print(f"{'first step':30s}{'cpu':>10s}{'npu':>10s}{'npu - cpu':>11s}  target")
    for idle in (1.5, 0.0):
        runs = {device: min((measure(device, idle) for _ in range(3)), key=lambda r: r["first"])
                for device in ("cpu", "npu")}
        extra = (runs["npu"]["first"] - runs["cpu"]["first"]) * 1e3
        target = f"<= 100 ms {'ok' if extra <= 100 else 'MISSED'}"
        print(f"{f'after {idle:.1f} s of setup':30s}{runs['cpu']['first'] * 1e3:8.1f}ms"
              f"{runs['npu']['first'] * 1e3:8.1f}ms{extra:9.1f}ms  {target}")
    print(f"{'second step':30s}{runs['cpu']['second'] * 1e3:8.1f}ms{runs['npu']['second'] * 1e3:8.1f}ms")


if __name__ == "__main__":
    main()
