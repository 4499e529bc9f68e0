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


def _spd(n):
    a = torch.randn(n, n, dtype=torch.float64)
    return (a @ a.mT + n * torch.eye(n, dtype=torch.float64)).float()


# Note [Out kernels that copy the functional result]: these out= kernels copy
# the functional result into an out they resize contiguous; the functional
# FFTs lay a transformed dimension out last in memory, cholesky column-major.
COPYING_OUTS = {
    "fft": (lambda x, out: torch.fft.fft(x, dim=1, out=out), torch.complex64, torch.complex64),
    "ifftn": (lambda x, out: torch.fft.ifftn(x, dim=(0, 1), out=out), torch.complex64, torch.complex64),
    "rfft": (lambda x, out: torch.fft.rfft(x, dim=1, out=out), torch.float32, torch.complex64),
    "irfft": (lambda x, out: torch.fft.irfft(x, dim=1, out=out), torch.complex64, torch.float32),
    "hfft2": (lambda x, out: torch.fft.hfft2(x, dim=(1, 0), out=out), torch.complex64, torch.float32),
    "ihfftn": (lambda x, out: torch.fft.ihfftn(x, out=out), torch.float32, torch.complex64),
}


@pytest.mark.parametrize("name", sorted(COPYING_OUTS))
def test_an_fft_out_is_resized_contiguous(name):
    fn, dtype, out_dtype = COPYING_OUTS[name]
    x = torch.randn(5, 6, 7, dtype=dtype)
    expected = torch.empty(0, dtype=out_dtype)
    fn(x, expected)
    for _ in range(2):  # the first call of a signature and a cached one
        result = torch.empty(0, dtype=out_dtype, device="npu")
        fn(x.npu(), result)
        assert result.stride() == expected.stride()
        assert result.is_contiguous()
        torch.testing.assert_close(result.cpu(), expected, atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(not hasattr(torch.ops.aten, "cholesky"), reason="torch 2.14 removed torch.cholesky")
@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
def test_a_cholesky_out_is_resized_contiguous():
    a = torch.stack([_spd(5), _spd(5)])
    expected = torch.empty(0)
    torch.cholesky(a, out=expected)
    result = torch.empty(0, device="npu")
    torch.cholesky(a.npu(), out=result)
    assert result.stride() == expected.stride() == (25, 5, 1)
    torch.testing.assert_close(result.cpu(), expected)
    result.view(-1)  # a transposed out could not be viewed flat


def test_a_functional_fft_keeps_the_cpu_layout():
    # Only the resized out= changes: the functional result keeps its layout.
    x = torch.randn(5, 6, 7, dtype=torch.complex64)
    expected = torch.fft.fft(x, dim=1)
    result = torch.fft.fft(x.npu(), dim=1)
    assert result.stride() == expected.stride()
    torch.testing.assert_close(result.cpu(), expected)
