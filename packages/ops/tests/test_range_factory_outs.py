"""out= tensors of arange, range, linspace and logspace keep their geometry
as on the CPU (Note [Range factories keep an out of the right size],
csrc/RangeFactoryOuts.h).

Their CPU kernels resize an out only when its element count differs from the
result's; the Python meta kernels, which the executor sizes outputs with,
reshape any out of another shape. A strided view of the right count must be
written in place, in its own element order, not turned into a contiguous
run of elements from its offset.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch_npu  # noqa: F401

_FILLS = {
    "arange": lambda out: torch.arange(0, 4, out=out),
    "range": lambda out: torch.range(0, 3, out=out),
    "linspace": lambda out: torch.linspace(0, 3, 4, out=out),
    "logspace": lambda out: torch.logspace(0, 3, 4, base=2, out=out),
}


def _fill_view(device: str, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    base = torch.zeros(2, 3, device=device)
    view = base.narrow(1, 1, 2)  # 2x2, strides (3, 1), offset 1: not contiguous
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.range is deprecated
        result = _FILLS[name](view)
    return base, result


@pytest.mark.parametrize("name", sorted(_FILLS))
def test_out_view_of_the_result_length_is_written_in_place(name):
    npu_base, npu_result = _fill_view("npu", name)
    cpu_base, cpu_result = _fill_view("cpu", name)
    # The elements outside the view stay zero; those inside hold the result
    # in the view's row-major order.
    torch.testing.assert_close(npu_base.cpu(), cpu_base, atol=0, rtol=0)
    assert (npu_result.shape, npu_result.stride(), npu_result.storage_offset()) == (
        cpu_result.shape,
        cpu_result.stride(),
        cpu_result.storage_offset(),
    ) == ((2, 2), (3, 1), 1)


def test_permuted_out_of_the_result_length_keeps_its_strides():
    npu_out = torch.zeros(3, 4, 5, device="npu").permute(2, 0, 1)
    cpu_out = torch.zeros(3, 4, 5).permute(2, 0, 1)
    torch.linspace(0, 59, 60, out=npu_out)
    torch.linspace(0, 59, 60, out=cpu_out)
    assert npu_out.stride() == cpu_out.stride() == (1, 20, 5)
    torch.testing.assert_close(npu_out.cpu(), cpu_out, atol=0, rtol=0)


def _resize_with_warnings(device: str) -> tuple[torch.Tensor, list[str]]:
    out = torch.zeros(1, 49, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.arange(-1, 1, 2.0 / 49, out=out)
    return out, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_out_of_another_length_is_resized_with_the_cpus_warning():
    npu_out, npu_warnings = _resize_with_warnings("npu")
    cpu_out, cpu_warnings = _resize_with_warnings("cpu")
    assert npu_out.shape == cpu_out.shape == (50,)
    torch.testing.assert_close(npu_out.cpu(), cpu_out)
    # The CPU kernel's own warning ("... will be resized"), not the generic
    # deprecation warning of resize_output.
    assert any("The out tensor will be resized" in m for m in cpu_warnings)
    assert npu_warnings == cpu_warnings


def test_empty_out_is_resized_to_the_result():
    npu_out = torch.empty(0, device="npu", dtype=torch.int64)
    torch.arange(5, out=npu_out)
    assert npu_out.shape == (5,)
    assert npu_out.cpu().tolist() == [0, 1, 2, 3, 4]
