"""Training on npu gives the losses of training on the CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401
from _training_models import SmallGPT, images, small_cnn, tokens


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
