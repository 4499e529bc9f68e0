"""An out= of the wrong size warns once on npu, as on the CPU: the Python
meta kernel that shapes the npu outputs stays quiet (torch_npu/ops/_meta_warnings.py).
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch_npu  # noqa: F401

_OPS = {
    "ceil": lambda t, out: torch.ceil(t, out=out),
    "abs_complex": lambda t, out: torch.abs(t.to(torch.complex64), out=out),
    "angle_complex": lambda t, out: torch.angle(t.to(torch.complex64), out=out),
}


def _resize_warnings(op, device):
    t = torch.tensor([1.5, -2.5, 3.0, 0.25], device=device)
    out = torch.empty(3, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = op(t, out)
        if device == "npu":
            torch.npu.synchronize()
    return [w for w in caught if "was resized" in str(w.message)], result


@pytest.mark.parametrize("name", sorted(_OPS))
def test_a_resized_out_warns_once_as_on_the_cpu(name):
    # A fresh op geometry: the meta kernel runs for this call.
    cpu_warnings, expected = _resize_warnings(_OPS[name], "cpu")
    npu_warnings, result = _resize_warnings(_OPS[name], "npu")
    assert len(cpu_warnings) == 1
    assert len(npu_warnings) == len(cpu_warnings)
    torch.testing.assert_close(result.cpu(), expected)


def test_the_check_still_warns_outside_npu_shaping():
    from torch._prims_common import wrappers

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert wrappers._resize_output_check(torch.empty(2, device="meta"), (3,))
    assert any("was resized" in str(w.message) for w in caught)
    assert not wrappers._resize_output_check(torch.empty(3, device="meta"), (3,))
