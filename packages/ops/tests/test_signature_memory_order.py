"""A call signature tells contiguous, channels-last and other tensors apart
(Note [Errors at the call], csrc/KernelArguments.h): CPU kernels refuse by
memory order, so a clean call on contiguous tensors must not let the same
op on a channels-last tensor through unverified.

nll_loss2d_backward refuses an input in channels-last order on the CPU (and
on CUDA): its zeros_like gradient keeps that order, and the kernel wants it
contiguous. Once a contiguous nll_loss of the same rank had run, the npu
backward went to the op's out= overload, with a contiguous gradient from
the meta kernel, and returned a gradient where the CPU raises. PyTorch's
test_nn probes found it.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401


def _nll_loss_grad(x, target, **kwargs):
    x = x.detach().requires_grad_()
    F.nll_loss(x, target, **kwargs).sum().backward()
    return x.grad


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss2d_backward_of_a_channels_last_input_raises_as_on_the_cpu(reduction):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 5)
    target = torch.randint(0, 3, (2, 4, 5))
    kwargs = {"reduction": reduction}
    for _ in range(2):
        # A clean contiguous call first: its signature is verified.
        grad = _nll_loss_grad(x.npu(), target.npu(), **kwargs)
        torch.testing.assert_close(grad.cpu(), _nll_loss_grad(x, target, **kwargs))
        channels_last = x.contiguous(memory_format=torch.channels_last)
        with pytest.raises(RuntimeError, match="grad_input must be contiguous"):
            _nll_loss_grad(channels_last, target, **kwargs)
        with pytest.raises(RuntimeError, match="grad_input must be contiguous"):
            _nll_loss_grad(channels_last.npu(), target.npu(), **kwargs)
            torch.npu.synchronize()


def test_permuted_input_of_nll_loss2d_raises_at_the_call():
    # Scores laid out (N, H, W, C) and permuted to (N, C, H, W), as users do.
    torch.manual_seed(1)
    scores = torch.randn(2, 4, 5, 3).log_softmax(-1)
    target = torch.randint(0, 3, (2, 4, 5))
    _nll_loss_grad(scores.permute(0, 3, 1, 2).contiguous().npu(), target.npu())
    with pytest.raises(RuntimeError, match="grad_input must be contiguous"):
        _nll_loss_grad(scores.permute(0, 3, 1, 2), target)
    with pytest.raises(RuntimeError, match="grad_input must be contiguous"):
        _nll_loss_grad(scores.npu().permute(0, 3, 1, 2), target.npu())


def test_other_memory_orders_still_compute_what_the_cpu_computes():
    # Ops whose kernels take any order keep working after the new verified
    # calls: a transposed and a channels-last input of a pointwise and a
    # reduction op of the generic executor.
    torch.manual_seed(2)
    x = torch.randn(2, 3, 4, 5)
    for t in (x, x.transpose(1, 3), x.contiguous(memory_format=torch.channels_last)):
        for _ in range(2):
            torch.testing.assert_close(torch.cumsum(t.npu(), 1).cpu(), torch.cumsum(t, 1))
            torch.testing.assert_close(F.log_softmax(t.npu(), 1).cpu(), F.log_softmax(t, 1))
