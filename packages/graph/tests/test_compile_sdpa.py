"""scaled_dot_product_attention under torch.compile on npu, forward and
backward: its backward is an extern kernel that wants its saved logsumexp in
another layout, and Inductor copies it into one (Note [Layout copies] in
compile/_program.py); the copy is a kernel of its own."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

from torch_npu.graph.compile import _mlir

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _attention_loss(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return (out * out).sum()


def _grads(fn, *inputs: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    loss = fn(*leaves)
    loss.backward()
    return loss.detach(), [t.grad for t in leaves]


@needs_mlir
@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_forward_and_backward_match_eager(causal):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 32, device="npu") for _ in range(3))
    expected_loss, expected_grads = _grads(lambda *t: _attention_loss(*t, causal), q, k, v)
    compiled = torch.compile(lambda *t: _attention_loss(*t, causal))
    (loss, grads), codes = run_and_get_code(_grads, compiled, q, k, v)
    torch.testing.assert_close(loss, expected_loss, atol=1e-4, rtol=1e-4)
    for grad, expected in zip(grads, expected_grads):
        torch.testing.assert_close(grad, expected, atol=1e-4, rtol=1e-4)
    backward = codes[-1]
    assert "_scaled_dot_product_flash_attention_for_cpu_backward" in backward
    assert "mlir_fused_copy_" in backward  # the logsumexp, copied into the layout it wants
