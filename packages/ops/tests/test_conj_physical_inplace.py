"""conj_physical_ of npu tensors runs the CPU's kernel.

Its only aten kernel is an explicit composite one that calls conj_physical's
DispatchStub for the tensor's device; npu has no entry there, so every
conj_physical_ of a complex npu tensor failed with "DispatchStub: missing
kernel for npu" (an internal assert), and with it torch.svd(..., out=) of a
complex matrix, whose out= path conjugates V in place (found probing
PyTorch's test_complex / OpInfo out= sweeps).
"""

from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401


def _complex(*shape):
    return torch.randn(*shape, dtype=torch.complex64)


@pytest.mark.parametrize(
    "view",
    [
        pytest.param(lambda t: t, id="contiguous"),
        pytest.param(lambda t: t.t(), id="transposed"),
        pytest.param(lambda t: t[:, ::2], id="strided"),
        pytest.param(lambda t: t[:0], id="empty"),
    ],
)
def test_conj_physical_inplace_matches_the_cpu(view):
    base = _complex(4, 6)
    expected = base.clone()
    view(expected).conj_physical_()
    result = base.npu()
    returned = view(result).conj_physical_()
    assert not returned.is_conj()
    torch.testing.assert_close(result.cpu(), expected)


def test_conj_physical_inplace_of_a_real_tensor_changes_nothing():
    x = torch.randn(3, 4)
    result = x.npu()
    result.conj_physical_()
    torch.testing.assert_close(result.cpu(), x)


def test_conj_physical_inplace_under_autograd():
    x = _complex(3, 3)
    grads = []
    for device in ("cpu", "npu"):
        leaf = x.clone().to(device).requires_grad_()
        y = leaf * 2
        y.conj_physical_()
        torch.view_as_real(y).pow(2).sum().backward()
        grads.append(leaf.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])


@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 4), (0, 3)])
def test_svd_of_a_complex_matrix_into_out_tensors(shape):
    a = _complex(*shape)
    expected = tuple(torch.empty(0, dtype=dt) for dt in (torch.complex64, torch.float32, torch.complex64))
    torch.svd(a, out=expected)
    result = tuple(torch.empty(0, dtype=dt, device="npu") for dt in (torch.complex64, torch.float32, torch.complex64))
    torch.svd(a.npu(), out=result)
    u, s, v = (t.cpu() for t in result)
    assert [t.shape for t in result] == [t.shape for t in expected]
    torch.testing.assert_close(s, expected[1], atol=1e-4, rtol=1e-4)
    # U and V are unique up to a phase per column; their product is not.
    torch.testing.assert_close(u @ torch.diag_embed(s).to(u.dtype) @ v.mH, a, atol=1e-4, rtol=1e-4)
