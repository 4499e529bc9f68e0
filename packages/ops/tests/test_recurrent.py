"""Recurrent modules and cells on npu match the CPU, forward and backward:
LSTM, GRU and RNN (tanh and ReLU), stacked, bidirectional, batch-first,
packed sequences, projections, and bfloat16 autocast. On npu the cells take
PyTorch's fused-cell kernels (csrc/RnnCellKernels.cpp) where the CPU runs
oneDNN or unfused cells, so float32 results agree to rounding, not bits;
float64 shows that the formulas are the same."""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

MODULES = {
    "lstm": lambda **kw: torch.nn.LSTM(5, 7, **kw),
    "lstm_proj": lambda **kw: torch.nn.LSTM(5, 7, proj_size=3, **kw),
    "gru": lambda **kw: torch.nn.GRU(5, 7, **kw),
    "rnn_tanh": lambda **kw: torch.nn.RNN(5, 7, **kw),
    "rnn_relu": lambda **kw: torch.nn.RNN(5, 7, nonlinearity="relu", **kw),
}


def run(name, device, dtype, packed, batch_first, autocast=None):
    torch.manual_seed(0)
    module = MODULES[name](num_layers=2, bidirectional=True, batch_first=batch_first).to(device, dtype)
    x = torch.randn(6, 3, 5, dtype=dtype)
    if batch_first:
        x = x.transpose(0, 1).contiguous()
    x = x.to(device).requires_grad_()
    inputs = pack_padded_sequence(x, torch.tensor([6, 4, 2]), batch_first=batch_first) if packed else x
    with torch.autocast(device, dtype=autocast, enabled=autocast is not None):
        out, hidden = module(inputs)
        if packed:
            out, _ = pad_packed_sequence(out, batch_first=batch_first)
        h = hidden[0] if isinstance(hidden, tuple) else hidden
        loss = (out.float() ** 2).sum() + h.float().sum()
    loss.backward()
    return [out.detach(), h.detach(), x.grad] + [p.grad for p in module.parameters()]


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("name", sorted(MODULES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_module_matches_cpu_forward_and_backward(name, dtype, packed):
    cpu = run(name, "cpu", dtype, packed, batch_first=False)
    npu = run(name, "npu", dtype, packed, batch_first=False)
    tolerance = {"atol": 1e-5, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 1e-12, "rtol": 1e-10}
    for c, n in zip(cpu, npu):
        assert n.device.type == "npu"
        torch.testing.assert_close(n.cpu(), c, **tolerance)


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_batch_first(name):
    cpu = run(name, "cpu", torch.float32, packed=True, batch_first=True)
    npu = run(name, "npu", torch.float32, packed=True, batch_first=True)
    for c, n in zip(cpu, npu):
        torch.testing.assert_close(n.cpu(), c, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["lstm", "gru", "rnn_tanh"])
def test_bf16_autocast_as_close_as_bf16_rounding(name):
    # npu autocasts the cells (CUDA's list); the CPU runs oneDNN's RNN in
    # bf16: both round to bf16, each differently, so compare with the
    # float32 result at bf16's precision.
    reference = run(name, "cpu", torch.float32, packed=False, batch_first=False)
    npu = run(name, "npu", torch.float32, packed=False, batch_first=False, autocast=torch.bfloat16)
    assert npu[0].dtype == torch.bfloat16
    for r, n in zip(reference[:3], npu[:3]):
        torch.testing.assert_close(n.cpu().float(), r, atol=0.05, rtol=0.05)


@pytest.mark.parametrize("cell", ["LSTMCell", "GRUCell", "RNNCell"])
@pytest.mark.parametrize("bias", [True, False])
def test_cells_and_double_backward(cell, bias):
    def make(device):
        torch.manual_seed(1)
        return getattr(torch.nn, cell)(4, 6, bias=bias).to(device, torch.float64)

    x = torch.randn(3, 4, dtype=torch.float64)
    results = {}
    for device in ("cpu", "npu"):
        module = make(device)
        xd = x.to(device).requires_grad_()
        out = module(xd)
        h = out[0] if isinstance(out, tuple) else out
        (grad,) = torch.autograd.grad(h.sin().sum(), xd, create_graph=True)
        (grad2,) = torch.autograd.grad(grad.sum(), xd)  # the differentiable backward
        results[device] = [h.detach().cpu(), grad.detach().cpu(), grad2.cpu()]
    for c, n in zip(results["cpu"], results["npu"]):
        torch.testing.assert_close(n, c)
