"""torch.compile of optimizer steps on npu, as PyTorch documents it
(``torch.compile(optimizer.step)``): the multi-tensor (foreach) optimizers
compile (Note [Foreach ops one tensor at a time]), read their host step
counts (Note [Host scalars a kernel reads]) and update parameters and states
in place (Note [Kernels that write their own inputs]) exactly as eager npu
does."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo

from torch_npu.graph.compile import _mlir
from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")

OPTIMIZERS = {
    "adam": lambda p: torch.optim.Adam(p, lr=1e-2),
    "adamw_amsgrad": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, amsgrad=True),
    "adam_capturable": lambda p: torch.optim.Adam(p, lr=1e-2, capturable=True),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, nesterov=True),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=1e-2, momentum=0.5),
    "nadam": lambda p: torch.optim.NAdam(p, lr=1e-2),
}


def _train(make_optimizer, compiled: bool) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)).npu()
    optimizer = make_optimizer(model.parameters())
    step = torch.compile(optimizer.step) if compiled else optimizer.step
    for i in range(3):
        inputs = torch.randn(4, 8, generator=torch.Generator().manual_seed(i)).npu()
        model(inputs).pow(2).sum().backward()
        step()
        optimizer.zero_grad()
    states = [t for state in optimizer.state.values() for t in state.values() if isinstance(t, torch.Tensor)]
    return [p.detach().cpu() for p in model.parameters()] + [t.detach().cpu() for t in states]


@needs_mlir
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_compiled_optimizer_step_matches_eager(name):
    expected = _train(OPTIMIZERS[name], compiled=False)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NPUKernelFallbackWarning)
        got = _train(OPTIMIZERS[name], compiled=True)
    torch._dynamo.reset()
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


@needs_mlir
def test_a_kernel_that_updates_its_input_in_place_reads_it_first():
    # The clone and the in-place update fuse into one kernel whose output is
    # the input's own buffer; MLIR ran the update's loop first and the clone
    # returned the doubled values.
    def clone_then_double(x: torch.Tensor) -> torch.Tensor:
        before = x.clone()
        x.mul_(2)
        return before

    def nesterov(g: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        buffer = g.clone()
        g.add_(buffer, alpha=0.9)
        p.add_(g, alpha=-0.1)
        return buffer

    for fn, shapes in ((clone_then_double, [(5,)]), (nesterov, [(2, 4), (2, 4)])):
        torch.manual_seed(0)
        inputs = [torch.randn(shape, device="npu") for shape in shapes]
        expected_inputs = [t.clone() for t in inputs]
        expected = fn(*expected_inputs)
        torch._dynamo.reset()
        got = torch.compile(fn)(*inputs)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        for g, e in zip(inputs, expected_inputs):
            torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-6)
    torch._dynamo.reset()
