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


def _pair(shapes=((2, 4), (3, 4))):
    g = torch.Generator().manual_seed(2)
    cpu = torch.nested.nested_tensor([torch.randn(*s, generator=g) for s in shapes])
    return cpu, cpu.npu()


def _assert_nested_equal(npu, cpu):
    assert npu.device.type == "npu" and npu.is_nested == cpu.is_nested
    if cpu.is_nested:
        # Component by component: .cpu() of a non-contiguous nested tensor
        # raises, on CUDA too.
        assert len(npu.unbind()) == len(cpu.unbind())
        for a, b in zip(npu.unbind(), cpu.unbind()):
            torch.testing.assert_close(a.cpu(), b, rtol=0, atol=0)
    else:
        torch.testing.assert_close(npu.cpu(), cpu, rtol=0, atol=0)


def test_writes_through_unbind_and_select_views_reach_the_nested_tensor():
    # unbind() and indexing return views of the buffer, on npu as on the CPU:
    # they were copies, and the writes were lost silently.
    cpu, npu = _pair()
    for t in (cpu, npu):
        t.unbind()[1].fill_(7.0)
        t[0, 1].fill_(5.0)
        t[0][0, 2] = -3.0
    _assert_nested_equal(npu, cpu)


@pytest.mark.parametrize(
    "view",
    [
        lambda t: t.transpose(-1, -2),
        lambda t: t.unsqueeze(1),
        lambda t: t.view(t.size(0), -1, 2, 2),
        lambda t: t.narrow(0, 1, 1),
        lambda t: t.chunk(2, -1)[1],
        lambda t: t.split_with_sizes([1, 3], -1)[1],
    ],
    ids=["transpose", "unsqueeze", "view", "narrow", "chunk", "split_with_sizes"],
)
def test_views_of_nested_npu_tensors_share_their_buffer(view):
    cpu, npu = _pair()
    views = {d: view(t) for d, t in (("cpu", cpu), ("npu", npu))}
    # The view is the CPU's (metadata over the same buffer) ...
    _assert_nested_equal(views["npu"], views["cpu"])
    assert views["npu"]._nested_tensor_strides().tolist() == views["cpu"]._nested_tensor_strides().tolist()
    # ... and sees writes into its base.
    cpu.add_(1.0)
    npu.add_(1.0)
    _assert_nested_equal(views["npu"], views["cpu"])


def test_ops_of_non_contiguous_nested_npu_tensors_equal_the_cpu():
    cpu, npu = _pair()
    for fn in (
        lambda t: t.transpose(-1, -2).contiguous(),
        lambda t: torch.softmax(t.transpose(-1, -2), -1),
        lambda t: t.transpose(-1, -2) + t.transpose(-1, -2),
        lambda t: torch.nested.to_padded_tensor(t.transpose(-1, -2).contiguous(), -1.0),
    ):
        _assert_nested_equal(fn(npu), fn(cpu))


def test_nested_from_padded_takes_its_nested_sizes_on_the_host_as_cuda():
    g = torch.Generator().manual_seed(3)
    padded = torch.randn(2, 3, 4, generator=g)
    sizes = torch.tensor([[1, 4], [3, 4]])
    expected = torch._nested_from_padded(padded, sizes)
    _assert_nested_equal(torch._nested_from_padded(padded.npu(), sizes), expected)


def test_nested_view_of_a_dense_npu_buffer_shares_it_and_values_backward_works():
    buffer = {d: torch.arange(10.0, device=d) for d in ("cpu", "npu")}
    sizes, strides, offsets = torch.tensor([[2, 2], [3, 2]]), torch.tensor([[2, 1], [2, 1]]), torch.tensor([0, 4])
    views = {d: torch._nested_view_from_buffer(b, sizes, strides, offsets) for d, b in buffer.items()}
    for b in buffer.values():
        b.mul_(-1)
    _assert_nested_equal(views["npu"], views["cpu"])
    # Tensor.values()' backward makes such a view of the gradient.
    grads = {}
    for d in ("cpu", "npu"):
        g = torch.Generator().manual_seed(4)
        a = torch.randn(1, 2, generator=g).to(d).requires_grad_()
        b = torch.randn(3, 2, generator=g).to(d).requires_grad_()
        (torch.nested.as_nested_tensor([a, b]).values() * torch.arange(8.0, device=d)).sum().backward()
        grads[d] = (a.grad, b.grad)
    for npu, cpu in zip(grads["npu"], grads["cpu"]):
        torch.testing.assert_close(npu.cpu(), cpu, rtol=0, atol=0)


def test_nested_metadata_are_host_tensors_as_on_cuda():
    cpu, npu = _pair()
    for t in (npu, npu.transpose(-1, -2)):
        ref = cpu if t is npu else cpu.transpose(-1, -2)
        for name in ("_nested_tensor_size", "_nested_tensor_strides", "_nested_tensor_storage_offsets"):
            meta = getattr(t, name)()
            assert meta.device.type == "cpu", name
            assert torch.equal(meta, getattr(ref, name)()), name


def test_copy_between_nested_npu_and_cpu_tensors_as_cuda():
    cpu, npu = _pair()
    to_cpu = torch.empty_like(npu, device="cpu")
    to_cpu.copy_(npu * 2)
    _assert_nested_equal(to_cpu.npu(), cpu * 2)
    to_npu = torch.empty_like(npu)
    to_npu.copy_(cpu * 3)
    _assert_nested_equal(to_npu, cpu * 3)
    with pytest.raises(RuntimeError, match="copy_ only supports tensors that are the same size"):
        to_npu.copy_(torch.nested.nested_tensor([torch.zeros(2)]))
