"""Note [Device work items run many times] (csrc/npu/NPUWork.h), for core's
own launches: with every item run twice, as replays of a captured graph
would run it, copies and fills give the same results, and work that reads
and writes the same memory does its work twice."""

from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.npu._testing import work_item_runs


@pytest.fixture
def items_run_twice():
    with work_item_runs(2):
        yield


def test_copies_and_fills_give_the_same_results_when_run_twice(items_run_twice):
    host = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    x = host.npu()
    assert torch.equal(x.cpu(), host)
    # A strided device-to-device copy and a cast: core's copy kernel.
    y = x.t().contiguous()
    assert torch.equal(y.cpu(), host.t())
    assert torch.equal(x.to(torch.float64).cpu(), host.double())
    z = torch.empty(4, 6, device="npu")
    z.fill_(3.5)
    assert torch.equal(z.cpu(), torch.full((4, 6), 3.5))
    z[:, ::2].zero_()
    expected = torch.full((4, 6), 3.5)
    expected[:, ::2] = 0
    assert torch.equal(z.cpu(), expected)


def test_a_copy_onto_its_own_memory_runs_twice_into_the_same_values(items_run_twice):
    x = torch.arange(10, dtype=torch.float32).npu()
    x[1:].copy_(x[:-1].clone())
    assert torch.equal(x.cpu(), torch.tensor([0.0, 0, 1, 2, 3, 4, 5, 6, 7, 8]))


def test_runs_must_be_positive():
    with pytest.raises(RuntimeError, match="runs must be >= 1, got 0"):
        torch_npu._C._set_work_runs_for_testing(0)
