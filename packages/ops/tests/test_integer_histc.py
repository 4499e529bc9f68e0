"""torch.histc of integer npu tensors follows CUDA's definition (the CPU
takes floating-point tensors only); floating-point tensors keep the CPU's
bins (csrc/HistogramKernels.cpp)."""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401


def cuda_integer_histc(values: torch.Tensor, bins: int, low: float, high: float) -> torch.Tensor:
    # CUDA's integer histogram, written out on the CPU in int64.
    v = values.reshape(-1).long()
    lo, hi = int(low), int(high)
    if lo == hi and v.numel():
        lo, hi = int(v.min()), int(v.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    inside = (v >= lo) & (v <= hi)
    index = torch.div((v - lo) * bins, hi - lo, rounding_mode="trunc").clamp_max(bins - 1)[inside]
    return torch.bincount(index, minlength=bins).to(values.dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8])
@pytest.mark.parametrize("bins,low,high", [(10, 0, 99), (7, 0, 0), (5, 10, 50), (3, 2.7, 60.2), (4, 20, 20)],
                         ids=["full", "data-range", "clipped", "fractional-edges", "single-value"])
def test_integer_histogram_follows_cuda(dtype, bins, low, high):
    values = torch.randint(0, 100, (1000,), generator=torch.Generator().manual_seed(0)).to(dtype)
    counts = torch.histc(values.npu(), bins=bins, min=low, max=high)
    assert counts.device.type == "npu" and counts.dtype == dtype
    torch.testing.assert_close(counts.cpu(), cuda_integer_histc(values, bins, low, high), rtol=0, atol=0)


def test_integer_histogram_edge_cases_and_out():
    same = torch.tensor([3, 3, 3], dtype=torch.int32, device="npu")
    assert torch.histc(same, 4).cpu().tolist() == [0, 0, 3, 0]  # the range [2, 4] around the only value
    assert torch.histc(torch.tensor([], dtype=torch.int32, device="npu"), 3).cpu().tolist() == [0, 0, 0]
    out = torch.empty(0, dtype=torch.int32, device="npu")
    result = torch.histc(torch.tensor([1, 2, 7], dtype=torch.int32, device="npu"), 2, 0, 3, out=out)
    assert result is out and out.cpu().tolist() == [1, 1]
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(same, 0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(same, 3, 5, 1)


def test_floating_point_histogram_keeps_the_cpu_bins():
    values = torch.randn(500, generator=torch.Generator().manual_seed(1))
    for low, high in [(0, 0), (-1, 1)]:
        torch.testing.assert_close(torch.histc(values.npu(), 7, low, high).cpu(), torch.histc(values, 7, low, high))
