"""Activation checkpointing (torch.utils.checkpoint) under torch.compile on
npu (Note [Random ops recomputed by checkpointing], _checkpoint_rng.py): a
checkpointed region's random ops are recomputed in the backward from the
generator state the forward saved. Compiling any checkpointed attention on
npu failed ("Backend not supported for npu"): transformers'
gradient_checkpointing_enable() with torch.compile."""

from __future__ import annotations

import torch
import torch._inductor.config as inductor_config
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def _run(fn, inputs, compiled: bool):
    """Output, input gradients and the npu generator state afterwards of
    ``fn`` checkpointed (forward, then the backward that recomputes it)."""
    torch._dynamo.reset()
    leaves = [t.clone().requires_grad_() for t in inputs]
    torch.manual_seed(0)
    run = torch.compile(fn) if compiled else fn
    out = run(*leaves)
    out.square().sum().backward()
    return out.detach(), [leaf.grad for leaf in leaves], torch.npu.get_rng_state()


def _checkpointed(block):
    return lambda *inputs: checkpoint(block, *inputs, use_reentrant=False)


def _assert_follows(compiled, eager, grad_rtol: float = 1e-5) -> None:
    """Compiled output and gradients (relative to each gradient's largest
    element) within float32 rounding of eager's, and the generator left in
    the same state."""
    torch.testing.assert_close(compiled[0], eager[0], rtol=1e-5, atol=1e-5)
    for got, expected in zip(compiled[1], eager[1]):
        torch.testing.assert_close(got, expected, rtol=grad_rtol, atol=grad_rtol * expected.abs().max().item())
    assert torch.equal(compiled[2], eager[2])


def test_checkpointed_attention_compiles_and_follows_eager():
    # Attention without dropout is still a random op to the partitioner
    # (scaled_dot_product_attention is tagged nondeterministic_seeded): the
    # case of every transformer layer under gradient checkpointing.
    def attention(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sin()

    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 4, 16, 8, device="npu") for _ in range(3))
    mask = torch.ones(16, 16, dtype=torch.bool, device="npu").tril()
    inputs = [q, k, v]
    eager = _run(_checkpointed(lambda q, k, v: attention(q, k, v, mask)), inputs, compiled=False)
    compiled = _run(_checkpointed(lambda q, k, v: attention(q, k, v, mask)), inputs, compiled=True)
    _assert_follows(compiled, eager)


def test_recomputed_dropout_draws_the_numbers_of_its_forward():
    # With fallback_random, compiled dropout draws eager's numbers from the
    # npu generator, so the recomputation must restore the state the
    # forward saved: a different mask gives gradients that differ by their
    # own size. Afterwards the generator is where eager leaves it.
    def block(x, w):
        return F.dropout(x @ w, p=0.4).sin() * x.sum()

    torch.manual_seed(1)
    inputs = [torch.randn(16, 16, device="npu") for _ in range(2)]
    with inductor_config.patch(fallback_random=True):
        eager = _run(_checkpointed(block), inputs, compiled=False)
        compiled = _run(_checkpointed(block), inputs, compiled=True)
    assert (eager[0] == 0).float().mean() > 0.2  # dropout dropped
    # Gradients of a few hundred: float32 rounding of the fused backward,
    # where another mask would differ by their own size.
    _assert_follows(compiled, eager, grad_rtol=1e-4)


def test_checkpointed_dropout_recomputes_its_forward_mask():
    # Inductor's own random numbers (Note [Random numbers of a kernel]):
    # compiled dropout draws other numbers than eager's, and torch 2.14 seeds
    # a checkpointed region apart from the rest. Whatever the numbers, the
    # backward must recompute the forward's mask: for dropout(x) * x the
    # gradient is mask * 2x / (1 - p), and the output shows the mask.
    def block(x):
        return F.dropout(x, p=0.5) * x

    torch.manual_seed(1)
    x = torch.randn(64, 64, device="npu", requires_grad=True)
    torch._dynamo.reset()
    out = torch.compile(_checkpointed(block))(x)
    out.sum().backward()
    kept = out.detach() != 0
    assert 0.4 < kept.float().mean() < 0.6
    torch.testing.assert_close(x.grad, kept * 4 * x.detach(), rtol=1e-6, atol=1e-6)
