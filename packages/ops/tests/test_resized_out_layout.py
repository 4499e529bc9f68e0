"""An out= the kernel resizes takes the layout the CPU gives it: for the
TensorIterator ops, the one of their inputs (Note [A resized out takes the
functional result's layout]).

PyTorch's Python meta kernels of these out= overloads (torch._refs' out
wrapper, registered once torch._dynamo is imported) resize the out
contiguous; the CPU kernel keeps channels_last. abs, absolute and
logical_not, which are their out= kernel called on an empty tensor, lost
channels_last even without out= (PyTorch's test_torch
test_memory_format_operators).
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo  # noqa: F401  registers the Python meta kernels in question
import torch_npu  # noqa: F401

UNARY = ["abs", "absolute", "sign", "sgn", "exp2", "expm1", "log1p", "log2", "ceil", "floor", "trunc", "frac",
         "asin", "atan", "erfinv", "digamma", "logit", "nan_to_num", "signbit", "logical_not", "exp", "neg"]


def _channels_last(x):
    return x.contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("name", UNARY)
def test_an_empty_out_takes_the_layout_of_the_input(name):
    op = getattr(torch, name)
    x = _channels_last(torch.rand(2, 3, 4, 5) * 0.8 + 0.1)
    expected = torch.empty(0, dtype=op(x).dtype)
    op(x, out=expected)
    result = torch.empty(0, dtype=expected.dtype, device="npu")
    op(x.npu(), out=result)
    assert result.stride() == expected.stride()
    torch.testing.assert_close(result.cpu(), expected)


@pytest.mark.parametrize("name", ["abs", "absolute", "logical_not"])
def test_ops_written_as_their_out_kernel_keep_channels_last(name):
    op = getattr(torch, name)
    x = _channels_last(torch.randn(2, 3, 4, 5))
    expected = op(x)
    result = op(x.npu())
    assert result.stride() == expected.stride()
    assert result.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(result.cpu(), expected)


def test_an_out_of_another_op_kind_keeps_the_cpu_layout():
    # mm's out= kernel resizes contiguous; a transposed input changes nothing.
    a = torch.randn(5, 4).t()
    b = torch.randn(5, 3)
    expected = torch.empty(0)
    torch.mm(a, b, out=expected)
    result = torch.empty(0, device="npu")
    torch.mm(a.npu(), b.npu(), out=result)
    assert result.stride() == expected.stride()
    torch.testing.assert_close(result.cpu(), expected)


def test_an_out_of_the_right_size_keeps_its_own_layout():
    x = _channels_last(torch.randn(2, 3, 4, 5))
    expected = torch.empty(2, 3, 4, 5)
    torch.abs(x, out=expected)
    result = torch.empty(2, 3, 4, 5, device="npu")
    torch.abs(x.npu(), out=result)
    assert result.stride() == expected.stride()
    torch.testing.assert_close(result.cpu(), expected)
