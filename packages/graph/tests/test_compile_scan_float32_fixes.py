"""Minimal cases of what the float32 run of the wide compiled OpInfo scan
(test_compile_opinfo_full.py) found, each compiled and compared with eager
npu:

- native_batch_norm's saved statistics: empty in eval mode and of the
  input's dtype in training, as eager npu (the CPU kernel) gives them; the
  compiled graph gave the CUDA shapes, silently (Note [Batch norm statistics
  as eager npu gives them]);
- torch.npu's generator state functions called while compiling (under
  torch.testing's freeze_rng_state, as OpInfo's sdpa samples do) run
  eagerly; tracing them raised (Note [Dynamo does not trace the npu
  generator state]);
- the gradient of diagonal_scatter: a group reading the clone whose
  diagonal was overwritten now reads it, where it recomputed the clone from
  the graph's input without the write and failed (Note [Reads of a buffer
  written through a view]);
- the gradient of an op of an empty input: the program creates the empty
  values it computes, where torch-mlir's lowering of the reshape of an
  empty iota died of SIGFPE (Note [Empty values a group does not read]).

Inputs are made inside each test: npu tensors made at import stay
allocated for the whole session.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch.testing._internal.common_utils import freeze_rng_state

from torch_npu.graph.compile import _mlir

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")


def _batch_norm_inputs(dtype: torch.dtype) -> list[torch.Tensor]:
    x = torch.linspace(-3.0, 5.0, 2 * 3 * 4).reshape(2, 3, 4)
    weight = torch.tensor([0.5, -1.5, 2.0])
    bias = torch.tensor([0.25, 0.0, -1.0])
    running_mean = torch.tensor([0.1, -0.2, 0.3])
    running_var = torch.tensor([1.5, 0.5, 2.0])
    return [t.to(dtype).to("npu") for t in (x, weight, bias, running_mean, running_var)]


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("training", [False, True], ids=["eval", "training"])
def test_native_batch_norm_statistics_as_eager(training: bool, dtype: torch.dtype) -> None:
    def fn(x, weight, bias, running_mean, running_var):
        return torch.native_batch_norm(x, weight, bias, running_mean, running_var, training, 0.1, 1e-5)

    inputs = _batch_norm_inputs(dtype)
    # Training updates the running statistics in place: each run has its own.
    expected = fn(*inputs[:3], inputs[3].clone(), inputs[4].clone())
    torch._dynamo.reset()
    actual = torch.compile(fn, dynamic=False)(*inputs[:3], inputs[3].clone(), inputs[4].clone())
    assert [(t.shape, t.dtype) for t in actual] == [(t.shape, t.dtype) for t in expected]
    if not training:
        assert actual[1].shape == (0,) and actual[2].shape == (0,)
    tolerance = 1e-2 if dtype == torch.float16 else 1e-5
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)


@needs_mlir
def test_generator_state_restored_while_compiling() -> None:
    q = torch.linspace(-1.0, 1.0, 2 * 3 * 4 * 8).reshape(2, 3, 4, 8).to("npu")

    def fn(q):
        with freeze_rng_state():
            return F.scaled_dot_product_attention(q, q * 0.5, q + 1.0)

    expected = fn(q)
    state = torch.npu.get_rng_state()
    torch._dynamo.reset()
    actual = torch.compile(fn, dynamic=False)(q)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(torch.npu.get_rng_state(), state)


@needs_mlir
def test_diagonal_scatter_gradient() -> None:
    base = torch.linspace(-2.0, 2.0, 25).reshape(5, 5).to("npu").requires_grad_()
    src = torch.linspace(1.0, 3.0, 5).to("npu").requires_grad_()

    def fn(base, src):
        out = torch.diagonal_scatter(base, src)
        # Weighted by position, so that a gradient routed to the wrong
        # element shows.
        weights = torch.arange(out.numel(), device=out.device).reshape(out.shape) % 7 + 1
        return torch.autograd.grad((out * weights).sum(), (base, src))

    expected = fn(base, src)
    torch._dynamo.reset()
    actual = torch.compile(fn, dynamic=False)(base, src)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(actual[0].diagonal().cpu(), torch.zeros(5))


@needs_mlir
def test_gradient_of_an_empty_input() -> None:
    x = torch.empty(1, 0, 3, device="npu").requires_grad_()

    def fn(x):
        out = torch.fill(x, 2.0) * x
        weights = torch.arange(out.numel(), device=out.device).reshape(out.shape) % 7 + 1
        total = (out * weights).sum()
        return total, torch.autograd.grad(total, x)

    expected = fn(x)
    torch._dynamo.reset()
    actual = torch.compile(fn, dynamic=False)(x)
    torch.testing.assert_close(actual, expected)
    assert actual[1][0].shape == (1, 0, 3)
