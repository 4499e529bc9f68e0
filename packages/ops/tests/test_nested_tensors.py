"""Nested npu tensors (torch.nested, strided layout): their buffer is npu
memory and their ops run the CPU's nested kernels as device work, with the
CPU's results (Note [Nested npu tensors]).

PyTorch's own fast paths make them on npu as on CUDA: nn.TransformerEncoder
in inference packs a padded batch into a nested tensor when it is given a
src_key_padding_mask."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch_npu  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_inference_with_a_padding_mask_equals_the_cpu(activation):
    torch.manual_seed(0)
    # batch_first and post-norm layers: what the nested fast path takes.
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, batch_first=True, activation=activation)
    encoder = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(16)).eval()
    assert encoder.use_nested_tensor
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 6, 16, generator=g)
    # True marks padding; rows are left aligned, as the fast path needs.
    mask = torch.tensor([[False] * 6, [False] * 3 + [True] * 3, [False] * 5 + [True]])
    with torch.no_grad():
        expected = encoder(x, src_key_padding_mask=mask)
        encoder.npu()
        actual = encoder(x.npu(), src_key_padding_mask=mask.npu())
    assert actual.device.type == "npu"
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)
    # The nested path ran: it leaves the padded positions of the output at
    # the padding value before the final norm, which maps them all to the
    # norm's bias (the dense path computes them like any other position).
    assert torch.equal(actual.cpu()[mask], encoder.norm.bias.detach().cpu().expand(int(mask.sum()), 16))


def test_nested_tensors_move_between_devices_and_compute_as_on_the_cpu():
    g = torch.Generator().manual_seed(1)
    cpu = torch.nested.nested_tensor([torch.randn(2, 4, generator=g), torch.randn(3, 4, generator=g)])
    npu = cpu.npu()
    assert npu.is_nested and npu.device.type == "npu"
    made_on_npu = torch.nested.nested_tensor([t for t in cpu.unbind()], device="npu")
    for t in (npu, made_on_npu):
        back = t.cpu()
        assert back.is_nested and back.device.type == "cpu"
        assert [u.shape for u in back.unbind()] == [torch.Size([2, 4]), torch.Size([3, 4])]
        assert all(torch.equal(a, b) for a, b in zip(back.unbind(), cpu.unbind()))
    result = (npu * 2 + 1).relu().to_padded_tensor(-1.0)
    assert result.device.type == "npu" and not result.is_nested
    assert torch.equal(result.cpu(), (cpu * 2 + 1).relu().to_padded_tensor(-1.0))
    # In place: the nested npu tensor keeps its buffer and takes the values.
    npu.mul_(3)
    assert torch.equal(npu.to_padded_tensor(0.0).cpu(), (cpu * 3).to_padded_tensor(0.0))
