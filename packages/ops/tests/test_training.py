"""Training on npu gives the losses of training on the CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_npu  # noqa: F401


def small_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(16, 10),
    )


class SmallGPT(nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 4, layers: int = 2, context: int = 16):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 64, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        return self.head(self.ln(self.blocks(x, mask=mask, is_causal=True)))


def images(g):
    return torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g)


def tokens(g):
    return torch.randint(0, 64, (4, 16), generator=g), torch.randint(0, 64, (4, 16), generator=g)


def train(make, data, device, optimizer_kwargs, steps=20):
    torch.manual_seed(0)
    model = make().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **optimizer_kwargs)
    losses = []
    for _ in range(steps):
        # The same batch each step: a task the model can learn in 20 steps.
        x, y = data(torch.Generator().manual_seed(1))
        x, y = x.to(device), y.to(device)
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("optimizer_kwargs", [{"foreach": False}, {"foreach": True}, {"fused": True}],
                         ids=["for-loop", "foreach", "fused"])
@pytest.mark.parametrize("make,data", [(small_cnn, images), (SmallGPT, tokens)], ids=["cnn", "gpt"])
def test_same_losses_as_cpu(make, data, optimizer_kwargs):
    cpu = train(make, data, "cpu", optimizer_kwargs)
    npu = train(make, data, "npu", optimizer_kwargs)
    assert cpu[-1] < cpu[0]  # it learns
    for a, b in zip(cpu, npu):
        assert abs(a - b) <= 1e-4 * max(1.0, abs(a)), (cpu, npu)
