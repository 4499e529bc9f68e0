"""A compiled optimizer step (``torch.compile(optimizer.step)``) vs eager
foreach and fused steps of the same optimizer on npu, on a model of about
10M parameters in several tensors; side by side in one run, best of
several runs (the machine is shared: the best run is the least disturbed).

    .venv/bin/python benchmarks/compile_optimizer_step.py [adam adamw ...]

Also prints how many launches of compiled kernels staged an output written
over an input (Note [Kernels that write their own inputs]).
"""

from __future__ import annotations

import gc
import sys
import time

import torch
import torch_npu  # noqa: F401

OPTIMIZERS = {
    "adam": lambda params, **kw: torch.optim.Adam(params, lr=1e-3, **kw),
    "adamw": lambda params, **kw: torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, **kw),
}


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


def _seconds_per_step(step, iters: int = 10, repeats: int = 5) -> float:
    for _ in range(3):
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


def _staged_launches() -> int:
    from torch_npu.graph.compile.kernel import MLIRKernel

    return sum(getattr(k, "staged_launches", 0) for k in gc.get_objects() if isinstance(k, MLIRKernel))


def main(names: list[str]) -> None:
    params = _params()
    print(f"{sum(p.numel() for p in params) / 1e6:.1f}M parameters in {len(params)} tensors")
    for name in names:
        make = OPTIMIZERS[name]
        times = {}
        for kind, kwargs in (("foreach", {"foreach": True}), ("fused", {"fused": True})):
            opt = make(params, **kwargs)
            times[kind] = _seconds_per_step(opt.step)
        opt = make(params, foreach=True)
        torch._dynamo.reset()
        step = torch.compile(opt.step)
        times["compiled"] = _seconds_per_step(step)
        torch._dynamo.reset()
        foreach = times["foreach"]
        print(f"{name}: " + ", ".join(f"{kind} {t * 1e3:.2f} ms ({foreach / t:.2f}x foreach)"
                                      for kind, t in times.items())
              + f"; staged launches so far {_staged_launches()}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(OPTIMIZERS))
