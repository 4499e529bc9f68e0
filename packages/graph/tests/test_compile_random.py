"""Random numbers in compiled npu kernels (Note [Random numbers of a
kernel]): torch.rand, randn, randint, bernoulli and dropout compile into MLIR
kernels (they fell back to eager ops with a warning), with the right
distribution, fresh numbers at each call and reproducible under
torch.npu.manual_seed. Compiled numbers differ from eager's, as on every
device, so the tests check distributions, not values."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from _mlir_only import compiled_as_mlir

N = 1 << 18
# Bounds below are about 6 standard errors of each statistic at N samples:
# a correct generator fails them with odds below 1e-8.
TOLERANCE = 6 / math.sqrt(N)


def draws(x: torch.Tensor):
    return torch.rand_like(x) * 1, torch.randn_like(x) + 0, torch.randint_like(x, 3, 10) * 1, torch.rand_like(x) + 0


def test_uniform_normal_and_integers_have_their_distributions():
    uniform, normal, integers, other = (t.cpu().double() for t in compiled_as_mlir(draws, torch.empty(N, device="npu")))
    assert 0 <= uniform.min() and uniform.max() < 1
    assert abs(uniform.mean() - 0.5) < TOLERANCE * math.sqrt(1 / 12)
    assert abs(uniform.var() - 1 / 12) < TOLERANCE * 0.075
    counts = torch.histc(uniform, 16, 0, 1)
    chi2 = ((counts - N / 16) ** 2 / (N / 16)).sum()
    assert chi2 < 60  # 15 degrees of freedom: P(chi2 > 60) ~ 1e-7
    assert abs(normal.mean()) < TOLERANCE and abs(normal.std() - 1) < TOLERANCE
    assert abs(((normal - normal.mean()) ** 4).mean() / normal.var() ** 2 - 3) < 0.1  # Gaussian tails
    assert integers.min() == 3 and integers.max() == 9 and torch.equal(integers, integers.round())
    assert (torch.bincount(integers.long())[3:] / N - 1 / 7).abs().max() < TOLERANCE
    # Two random ops of one graph, and neighbouring elements, are independent.
    assert abs(torch.corrcoef(torch.stack([uniform, other]))[0, 1]) < TOLERANCE
    assert abs(torch.corrcoef(torch.stack([uniform[1:], uniform[:-1]]))[0, 1]) < TOLERANCE


def test_fresh_numbers_at_each_call_reproducible_under_manual_seed():
    x = torch.empty(1024, device="npu")
    compiled_as_mlir(draws, x)  # compiled once
    step = torch.compile(draws, dynamic=False)
    torch.npu.manual_seed(7)
    first, second = step(x)[0].cpu(), step(x)[0].cpu()
    torch.npu.manual_seed(7)
    again = step(x)[0].cpu()
    assert not torch.equal(first, second)
    assert torch.equal(first, again)


def test_dropout_keeps_its_fraction_and_its_backward_uses_the_same_mask():
    x = torch.randn(256, 1024, device="npu", requires_grad=True)
    out = compiled_as_mlir(lambda t: F.dropout(t * 2, 0.3, True), x)
    out.sum().backward()
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.7) < TOLERANCE
    torch.testing.assert_close(out[kept], x.detach()[kept] * 2 / 0.7)
    # The backward recomputes or saves the forward's mask: the gradient is
    # 2 / 0.7 exactly where the forward kept the element, 0 elsewhere.
    torch.testing.assert_close(x.grad, kept.float() * (2 / 0.7))


def test_attention_dropout_scales_the_kept_probabilities():
    x = torch.randn(64, 128, device="npu")
    out = compiled_as_mlir(lambda t: F.dropout(torch.softmax(t, -1), 0.1, True), x)
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.9) < 6 / math.sqrt(x.numel())
    torch.testing.assert_close(out[kept], (torch.softmax(x, -1) / 0.9)[kept])


def test_bernoulli_of_probabilities():
    p = torch.rand(N, generator=torch.Generator().manual_seed(0)).npu()
    drawn = compiled_as_mlir(lambda q: torch.bernoulli(q), p).cpu()
    assert set(drawn.unique().tolist()) <= {0.0, 1.0}
    assert abs(drawn.mean().item() - p.mean().item()) < TOLERANCE
