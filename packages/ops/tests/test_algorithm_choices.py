"""Where PyTorch picks an algorithm by device type, npu picks the CPU's: it
runs the CPU's kernels, so it then rounds exactly as the CPU does."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401


def leaves(*tensors: torch.Tensor, device: str) -> list[torch.Tensor]:
    return [t.detach().to(device).requires_grad_() for t in tensors]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_scaled_dot_product_attention_runs_the_cpus_kernel(dtype):
    # With is_causal and L != S the CPU's flash kernel and the math
    # decomposition round differently: npu must run the flash kernel too.
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, n, 16, generator=g, dtype=dtype) for n in (5, 9, 9))
    results = {}
    for device in ("cpu", "npu"):
        qd, kd, vd = leaves(q, k, v, device=device)
        out = F.scaled_dot_product_attention(qd, kd, vd, is_causal=True)
        out.square().sum().backward()
        results[device] = [t.cpu() for t in (out, qd.grad, kd.grad, vd.grad)]
    for actual, expected in zip(results["npu"], results["cpu"]):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)


@pytest.mark.skipif(not hasattr(torch.nn, "LinearCrossEntropyOptions"),
                    reason="this torch has no F.linear_cross_entropy options")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_linear_cross_entropy_resolves_auto_as_on_the_cpu(dtype):
    # acc_policy="auto" is resolved per device type; in reduced precision
    # another policy rounds the weight gradient differently.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(24, 16, generator=g, dtype=dtype)
    w = torch.randn(40, 16, generator=g, dtype=dtype)
    target = torch.randint(0, 40, (24,), generator=g)
    options = torch.nn.LinearCrossEntropyOptions(batch_chunk_size=8)
    results = {}
    for device in ("cpu", "npu"):
        xd, wd = leaves(x, w, device=device)
        loss = F.linear_cross_entropy(xd, wd, target.to(device), options=options)
        loss.backward()
        results[device] = [t.cpu() for t in (loss, xd.grad, wd.grad)]
    for actual, expected in zip(results["npu"], results["cpu"]):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
