"""Quantized tensors on npu are refused at the call, saying what to do
(csrc/QuantizedTensors.cpp); nothing wrong is returned or queued."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch_npu  # noqa: F401

REFUSAL = r"npu does not support quantized tensors .* Quantize on the CPU instead"


def _quantized_cpu():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized dtypes are deprecated
        return torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.quint8)


@pytest.mark.parametrize(
    "make",
    [
        lambda x: torch.quantize_per_tensor(x, 0.1, 0, torch.quint8),
        lambda x: torch.quantize_per_tensor(x, torch.tensor(0.1).npu(), torch.tensor(0).npu(), torch.qint8),
        lambda x: torch.quantize_per_tensor_dynamic(x, torch.quint8, False),
        lambda x: torch.quantize_per_channel(x.reshape(2, 2), torch.tensor([0.1, 0.2]).npu(),
                                             torch.tensor([0, 0]).npu(), 0, torch.qint8),
        lambda x: torch.empty(4, dtype=torch.qint32, device=x.device),
        lambda x: _quantized_cpu().npu(),
        lambda x: _quantized_cpu().to(x.device),
    ],
    ids=["per_tensor", "per_tensor_tensor_qparams", "per_tensor_dynamic", "per_channel", "empty", "npu", "to"],
)
def test_making_a_quantized_npu_tensor_raises_at_the_call(make):
    x = torch.randn(4).npu()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NotImplementedError, match=REFUSAL):
            make(x)
    torch.npu.synchronize()  # nothing was queued that could fail later


def test_the_suggested_cpu_round_trip_works():
    x = torch.randn(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = torch.quantize_per_tensor(x.npu().cpu(), 0.1, 0, torch.quint8)
    back = q.dequantize().to("npu")
    torch.testing.assert_close(back.cpu(), q.dequantize())


def test_the_cpus_own_argument_errors_come_first_where_no_quantized_tensor_is_made():
    # A non-quantized dtype: the CPU kernel's error, as on the CPU.
    with pytest.raises(RuntimeError, match="ScalarType Float is not supported in new_qtensor"):
        torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.float32)
    with pytest.raises(RuntimeError, match="ScalarType Float is not supported in new_qtensor"):
        torch.quantize_per_tensor(torch.randn(4).npu(), 0.1, 0, torch.float32)
