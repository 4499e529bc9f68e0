"""A compiled optimizer step (``torch.compile(optimizer.step)``) vs eager
foreach and fused steps of the same optimizer on npu, on a model of about
10M parameters in several tensors; side by side in one process, the runs
of each interleaved over several rounds and the best kept (the machine is
shared: the best run is the least disturbed).

    .venv/bin/python benchmarks/compile_optimizer_step.py [adam adamw ...]

"compiled, staged" runs the same compiled step with every output written
over an input staged, as before Note [Outputs written over their own
inputs]; the launches that staged are counted per variant.
"""

from __future__ import annotations

import sys
import time

import torch
import torch_npu  # noqa: F401
from torch_npu.graph.compile import kernel

OPTIMIZERS = {
    "adam": lambda params, **kw: torch.optim.Adam(params, lr=1e-3, **kw),
    "adamw": lambda params, **kw: torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, **kw),
}
ROUNDS = 4

_KERNELS: list[kernel.MLIRKernel] = []


def _record_kernels() -> None:
    """Keeps each npu kernel made from now on, to read its counters."""
    original = kernel.MLIRKernel.__init__

    def recording_init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        _KERNELS.append(self)

    kernel.MLIRKernel.__init__ = recording_init


def _params() -> list[torch.nn.Parameter]:
    # 8 tensors of 1024 x 1216 plus their biases: ~10M parameters.
    torch.manual_seed(0)
    params = []
    for _ in range(8):
        params.append(torch.nn.Parameter(torch.randn(1024, 1216, device="npu") * 0.01))
        params.append(torch.nn.Parameter(torch.zeros(1216, device="npu")))
    for p in params:
        p.grad = torch.randn_like(p) * 0.01
    return params


def _seconds_per_step(step, iters: int = 10, repeats: int = 3) -> float:
    for _ in range(2):
        step()
    torch.npu.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            step()
        torch.npu.synchronize()
        best = min(best, (time.perf_counter() - start) / iters)
    return best


def main(names: list[str]) -> None:
    _record_kernels()
    params = _params()
    print(f"{sum(p.numel() for p in params) / 1e6:.1f}M parameters in {len(params)} tensors, best of {ROUNDS} rounds")
    in_place_pairs = kernel._in_place_pairs
    for name in names:
        make = OPTIMIZERS[name]
        compiled = make(params, foreach=True)
        torch._dynamo.reset()
        steps = {"foreach": make(params, foreach=True).step, "fused": make(params, fused=True).step,
                 "compiled, staged": torch.compile(compiled.step)}
        steps["compiled"] = steps["compiled, staged"]
        best = dict.fromkeys(steps, float("inf"))
        staged = dict.fromkeys(steps, 0)
        for _ in range(ROUNDS):
            for kind, step in steps.items():
                kernel._in_place_pairs = (lambda c: frozenset()) if kind == "compiled, staged" else in_place_pairs
                before = sum(k.staged_launches for k in _KERNELS)
                best[kind] = min(best[kind], _seconds_per_step(step))
                staged[kind] += sum(k.staged_launches for k in _KERNELS) - before
        kernel._in_place_pairs = in_place_pairs
        torch._dynamo.reset()
        foreach = best["foreach"]
        print(f"{name}: " + ", ".join(f"{kind} {t * 1e3:.2f} ms ({foreach / t:.2f}x foreach"
                                      + (f", {staged[kind]} staged launches)" if "compiled" in kind else ")")
                                      for kind, t in best.items()))


if __name__ == "__main__":
    main(sys.argv[1:] or list(OPTIMIZERS))
