"""Pooling calls whose CPU kernel refuses them or lays their results out
differently from the meta kernel, with the Python meta kernels active
(torch._dynamo imported, as PyTorch's test suites and torch.compile users do).

- fractional_max_pool3d: the CPU kernel checks _random_samples against the
  input (batch, channels, three samples a plane); the Python meta kernel does
  not and the call signature leaves sizes out, so after one clean call a
  mismatched one was queued and its error surfaced at a later
  synchronization (ArgumentChecks.cpp).
- max_pool3d of an unbatched input that is a squeezed channels-last-3d batch
  of one: the CPU kernel returns results in that order, the meta kernel made
  them contiguous (Note [Results laid out as the CPU kernel lays them out]).

PyTorch's test_pooling probes (test_max_pool3d_ndhwc) found the second.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo  # noqa: F401  (activates the Python meta kernels)
import torch.nn.functional as F

import torch_npu  # noqa: F401


def _frac3d(x, samples):
    return F.fractional_max_pool3d(x, 2, output_size=3, return_indices=True, _random_samples=samples)


@pytest.mark.parametrize(
    ("shape", "samples_shape", "message"),
    [
        ((2, 3, 7, 8, 9), (2, 6, 3), r"_random_samples.size\(1\) equals to input channel size"),
        ((3, 6, 7, 8, 9), (2, 6, 3), r"_random_samples.size\(0\) no less then input batch size"),
        ((2, 6, 7, 8, 9), (2, 6, 2), r"_random_samples.size\(2\) equals to 3"),
        ((6, 7, 8, 9), (1, 5, 3), r"_random_samples.size\(1\) equals to input channel size"),
    ],
)
def test_fractional_max_pool3d_refuses_mismatched_samples_at_the_call(shape, samples_shape, message):
    torch.manual_seed(0)
    # A clean call of the same ranks and dtypes first: its signature is verified.
    x = torch.randn(2, 6, 7, 8, 9)
    samples = torch.rand(2, 6, 3)
    out, ind = _frac3d(x.npu(), samples.npu())
    ref_out, ref_ind = _frac3d(x, samples)
    torch.testing.assert_close(out.cpu(), ref_out)
    torch.testing.assert_close(ind.cpu(), ref_ind)
    bad_x, bad_samples = torch.randn(shape), torch.full(samples_shape, 0.5)
    with pytest.raises(RuntimeError, match=message):
        _frac3d(bad_x, bad_samples)
    with pytest.raises(RuntimeError, match=message):
        _frac3d(bad_x.npu(), bad_samples.npu())
    torch.npu.synchronize()  # nothing left to fail later


def test_fractional_max_pool3d_of_an_empty_batch_still_runs():
    samples = torch.rand(0, 4, 3)
    x = torch.randn(0, 4, 6, 6, 6)
    out, _ = _frac3d(x.npu(), samples.npu())
    assert out.shape == _frac3d(x, samples)[0].shape


def _squeezed_channels_last_3d(*shape):
    return torch.randn(1, *shape).contiguous(memory_format=torch.channels_last_3d).squeeze(0)


@pytest.mark.parametrize("kernel_size", [2, (5, 6, 7)])
def test_unbatched_max_pool3d_lays_results_out_as_the_cpu(kernel_size):
    torch.manual_seed(1)
    x = _squeezed_channels_last_3d(6, 14, 12, 13)
    npu_x = torch.empty_strided(x.shape, x.stride(), device="npu").copy_(x)
    for _ in range(2):  # the first call of a signature may run synchronously
        out, ind = F.max_pool3d(npu_x, kernel_size, return_indices=True)
        ref_out, ref_ind = F.max_pool3d(x, kernel_size, return_indices=True)
        assert out.stride() == ref_out.stride()
        assert ind.stride() == ref_ind.stride()
        torch.testing.assert_close(out.cpu(), ref_out)
        torch.testing.assert_close(ind.cpu(), ref_ind)
    # Contiguous unbatched inputs keep contiguous results.
    c = x.contiguous()
    assert F.max_pool3d(c.npu(), kernel_size).stride() == F.max_pool3d(c, kernel_size).stride()


def test_unbatched_max_pool3d_backward_matches_the_cpu():
    torch.manual_seed(2)
    x = _squeezed_channels_last_3d(4, 6, 6, 6)
    npu_x = torch.empty_strided(x.shape, x.stride(), device="npu").copy_(x).requires_grad_()
    cpu_x = x.clone().requires_grad_()
    for t in (npu_x, cpu_x):
        out = F.max_pool3d(t, 2)
        out.backward(torch.arange(out.numel(), dtype=out.dtype, device=out.device).view(out.shape))
    assert npu_x.grad.stride() == cpu_x.grad.stride()
    torch.testing.assert_close(npu_x.grad.cpu(), cpu_x.grad)


def test_max_pool3d_refuses_a_channels_last_4d_input_at_the_call_after_an_ambiguous_one():
    # Both are channels-last 4-d tensors; with its size-one batch dimension
    # strided like its height the first reads as contiguous to the CPU
    # kernel (suggest_memory_format), which pools it; the second it refuses.
    # A clean call of the first used to let the second through unverified,
    # its error surfacing at the next synchronization.
    torch.manual_seed(3)
    accepted = torch.empty_strided((1, 7, 8, 9), (63, 1, 63, 7)).copy_(torch.randn(1, 7, 8, 9))
    refused = torch.randn(6, 7, 8, 9).contiguous(memory_format=torch.channels_last)
    for t in (accepted, refused):
        assert t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()

    def on_npu(t):
        return torch.empty_strided(t.shape, t.stride(), device="npu").copy_(t)

    for _ in range(2):
        out = F.max_pool3d(on_npu(accepted), 1)
        torch.testing.assert_close(out.cpu(), F.max_pool3d(accepted, 1))
    with pytest.raises(RuntimeError, match="Unsupported memory format"):
        F.max_pool3d(refused, 1)
    with pytest.raises(RuntimeError, match="Unsupported memory format"):
        F.max_pool3d(on_npu(refused), 1)
    torch.npu.synchronize()
