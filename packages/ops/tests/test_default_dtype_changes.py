"""Queued npu work computes in the default dtype of its call (Note [Work
queued before a default dtype change], torch_npu/ops/_default_dtype.py).

Integer inputs of a floating op (true division, sqrt) compute in the default
dtype. The CPU kernel on the worker read it when the work ran: a division
queued under float64 that ran after the default went back to float32 gave a
float64 result holding float32 values.
"""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401

_OPS = {
    "true_divide": lambda a, b: torch.divide(a, b),
    "sqrt": lambda a, b: torch.sqrt(a),
    "atan2": lambda a, b: torch.atan2(a, b),
}


def _inputs(dtype):
    a = torch.arange(1, 4097, dtype=dtype) * 524287
    b = torch.arange(3, 4099, dtype=dtype)
    return a, b


@pytest.mark.parametrize("name", sorted(_OPS))
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_work_queued_under_float64_computes_in_float64(name, dtype):
    op = _OPS[name]
    a, b = _inputs(dtype)
    an, bn = a.npu(), b.npu()
    with torch.testing._internal.common_utils.set_default_dtype(torch.float64):
        expected = op(a, b)
        op(an, bn)  # the first call of a signature waits for its kernel
        torch.npu._sleep(100 * torch.npu._cycles_per_ms())  # the work below runs after the with ends
        result = op(an, bn)
    assert result.dtype == expected.dtype == torch.float64
    torch.testing.assert_close(result.cpu(), expected, rtol=0, atol=0)


def test_work_queued_under_float32_computes_in_float32():
    # Integers float32 rounds: a division in float64 rounds differently.
    a = torch.arange(1, 4097, dtype=torch.int64) * (2**40 + 12345) + 777
    b = torch.arange(3, 4099, dtype=torch.int64) * 1000003
    an, bn = a.npu(), b.npu()
    torch.divide(an, bn)
    torch.npu.synchronize()
    expected = torch.divide(a, b)
    torch.npu._sleep(100 * torch.npu._cycles_per_ms())
    result = torch.divide(an, bn)
    torch.set_default_dtype(torch.float64)
    try:
        float64_meanwhile = torch.divide(a, b)
    finally:
        torch.set_default_dtype(torch.float32)
    assert float64_meanwhile.dtype == torch.float64
    assert result.dtype == torch.float32
    torch.testing.assert_close(result.cpu(), expected, rtol=0, atol=0)


def test_setting_the_same_default_dtype_waits_for_nothing():
    torch.npu._sleep(300 * torch.npu._cycles_per_ms())
    torch.set_default_dtype(torch.get_default_dtype())
    # The sleep is still queued: the host did not wait for it.
    assert not torch.npu.current_stream().query()


def test_the_setters_stay_wrapped_once():
    from torch_npu.ops import _default_dtype

    setter = torch._C._set_default_dtype
    _default_dtype.install()
    assert torch._C._set_default_dtype is setter
    assert setter._npu_waits_for_queued_work
