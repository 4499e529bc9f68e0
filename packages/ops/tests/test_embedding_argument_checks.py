"""embedding_dense_backward refuses a gradient whose size does not match its
indices at the call, with the CPU's error (ArgumentChecks.cpp).

The CPU kernel views the gradient as one row per index; the Python meta
kernel (active once torch._dynamo is imported) does not check it, and the call
signature leaves sizes out, so after a clean call a mismatched one was queued
and failed at a later synchronization.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo  # noqa: F401  (activates the Python meta kernels)

import torch_npu  # noqa: F401


def _backward(grad, indices, padding_idx=-1, scale_grad_by_freq=False):
    return torch.ops.aten.embedding_dense_backward(grad, indices, 10, padding_idx, scale_grad_by_freq)


@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
def test_embedding_dense_backward_refuses_a_mismatched_gradient_at_the_call(scale_grad_by_freq):
    torch.manual_seed(0)
    grad, indices = torch.randn(2, 4), torch.tensor([1, 2])
    for _ in range(2):  # clean calls of the same signature first
        got = _backward(grad.npu(), indices.npu(), 2, scale_grad_by_freq)
        torch.testing.assert_close(got.cpu(), _backward(grad, indices, 2, scale_grad_by_freq))
    bad = torch.tensor([1, 2, 3])
    with pytest.raises(RuntimeError) as on_cpu:
        _backward(grad, bad, 2, scale_grad_by_freq)
    with pytest.raises(RuntimeError) as on_npu:
        _backward(grad.npu(), bad.npu(), 2, scale_grad_by_freq)
    assert str(on_npu.value) == str(on_cpu.value)
    torch.npu.synchronize()  # nothing left to fail later


def test_embedding_gradients_of_other_shapes_still_match_the_cpu():
    torch.manual_seed(1)
    weight = torch.randn(10, 3)
    for indices in (torch.tensor([[1, 2, 2], [0, 9, 9]]), torch.tensor([], dtype=torch.long), torch.tensor(4)):
        w = weight.clone().requires_grad_()
        wn = weight.npu().requires_grad_()
        out, out_n = torch.nn.functional.embedding(indices, w), torch.nn.functional.embedding(indices.npu(), wn)
        out.backward(torch.ones_like(out))
        out_n.backward(torch.ones_like(out_n))
        torch.testing.assert_close(wn.grad.cpu(), w.grad)
