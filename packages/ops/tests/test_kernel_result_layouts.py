"""Results whose meta kernel's strides are not the CPU kernel's get the CPU
kernel's (Note [Results laid out as the CPU kernel lays them out],
csrc/KernelResultLayouts.h).

With the Python meta kernels active, F.channel_shuffle of a channels-last
tensor came back contiguous on npu (channels-last on the CPU), and
F.logsigmoid and F.rrelu (eval) of a transposed tensor came back transposed
(contiguous on the CPU), max_unpool2d of a channels-last input contiguous,
and copysign or floor_divide of a transposed tensor by a 0-dim npu tensor
contiguous (transposed on the CPU); before the meta kernels were ready the
same calls had the CPU's strides. PyTorch's test_nn probes (and an OpInfo
stride sweep next to them) found them.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo  # noqa: F401  (the Python meta kernels become active)
import torch.nn.functional as F

import torch_npu  # noqa: F401


def _check_like_cpu(fn, x):
    expected = fn(x)
    for _ in range(2):  # the first call of a signature and a verified one
        result = fn(x.npu())
        assert result.stride() == expected.stride()
        torch.testing.assert_close(result.cpu(), expected)


@pytest.mark.parametrize("groups", [1, 2, 3])
@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
def test_channel_shuffle_keeps_the_inputs_memory_order(groups, memory_format):
    x = torch.randn(2, 6, 3, 4).contiguous(memory_format=memory_format)
    _check_like_cpu(lambda t: F.channel_shuffle(t, groups), x)
    _check_like_cpu(lambda t: torch.native_channel_shuffle(t, groups), x)


def test_channel_shuffle_of_a_channels_last_3d_input():
    x = torch.randn(2, 6, 3, 4, 2).contiguous(memory_format=torch.channels_last_3d)
    _check_like_cpu(lambda t: F.channel_shuffle(t, 3), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_logsigmoid_and_rrelu_of_a_transposed_tensor_are_contiguous(dtype):
    x = torch.randn(6, 4, dtype=dtype).t()
    _check_like_cpu(F.logsigmoid, x)
    _check_like_cpu(lambda t: F.rrelu(t, 0.1, 0.3, training=False), x)
    channels_last = torch.randn(2, 3, 4, 5, dtype=dtype).contiguous(memory_format=torch.channels_last)
    _check_like_cpu(F.logsigmoid, channels_last)


def test_logsigmoid_gradient_of_a_transposed_tensor():
    x = torch.randn(6, 4).t()
    expected = x.detach().requires_grad_()
    F.logsigmoid(expected).sum().backward()
    result = x.npu().requires_grad_()
    F.logsigmoid(result).sum().backward()
    torch.testing.assert_close(result.grad.cpu(), expected.grad)


def test_logsigmoid_out_keeps_the_outs_layout():
    x = torch.randn(2, 3).t()
    out = torch.zeros(3, 2, device="npu").t().t()  # contiguous (3, 2)
    noncontig = torch.zeros(2, 3, device="npu").t()
    F.logsigmoid(x.npu(), out=out)
    F.logsigmoid(x.npu(), out=noncontig)
    assert noncontig.stride() == (1, 3)
    torch.testing.assert_close(out.cpu(), F.logsigmoid(x))
    torch.testing.assert_close(noncontig.cpu(), F.logsigmoid(x))


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
def test_max_unpool2d_keeps_the_inputs_memory_order(memory_format):
    x = torch.randn(2, 3, 4, 6).contiguous(memory_format=memory_format)
    pooled, indices = F.max_pool2d(x, 2, return_indices=True)
    expected = F.max_unpool2d(pooled, indices, 2)
    for _ in range(2):
        result = F.max_unpool2d(pooled.npu(), indices.npu(), 2)
        assert result.stride() == expected.stride()
        torch.testing.assert_close(result.cpu(), expected)
    # Unbatched (3-d): contiguous on the CPU whatever the order.
    unbatched = F.max_unpool2d(pooled[0].npu(), indices[0].npu(), 2)
    assert unbatched.stride() == F.max_unpool2d(pooled[0], indices[0], 2).stride()


@pytest.mark.parametrize("name", ["copysign", "floor_divide"])
def test_binary_op_by_a_0_dim_npu_tensor_follows_the_other_inputs_order(name):
    op = getattr(torch, name)
    x = torch.randn(5, 10).t()
    scalar = torch.tensor(4.5)
    expected = op(x, scalar)
    assert expected.stride() == (1, 10)
    for other in (scalar.npu(), scalar):
        for _ in range(2):
            result = op(x.npu(), other)
            assert result.stride() == expected.stride()
            torch.testing.assert_close(result.cpu(), expected)
    # Broadcasting and channels-last operands keep the CPU's strides too.
    a = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    b = torch.randn(3, 1, 1) + 2
    assert op(a.npu(), b.npu()).stride() == op(a, b).stride()
    assert op(b.npu(), a.npu()).stride() == op(b, a).stride()
    torch.testing.assert_close(op(a.npu(), b.npu()).cpu(), op(a, b))
