"""Note [Device work items run many times] (core csrc/npu/NPUWork.h), for
the ops package's launches: with every item run twice, as replays of a
captured graph would run it, each kind of item (fast-path kernel, the
generic executor's asynchronous, out= and synchronous paths with their
result transfers, random ops) computes what it computes once, and in-place
work does its work twice: no item consumes its arguments."""

from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.npu._testing import work_item_runs


@pytest.fixture
def items_run_twice():
    with work_item_runs(2):
        yield


def _inputs():
    torch.manual_seed(0)
    a, b = torch.randn(5, 7), torch.randn(5, 7)
    return a, b, a.npu(), b.npu()


def test_out_of_place_items_compute_the_same_result(items_run_twice):
    a, b, na, nb = _inputs()
    torch.testing.assert_close((na + nb).cpu(), a + b)  # fast path
    torch.testing.assert_close(torch.where(na > 0, na, nb).cpu(), torch.where(a > 0, a, b))  # executor
    torch.testing.assert_close(torch.cumsum(na, 1).cpu(), torch.cumsum(a, 1))
    torch.testing.assert_close(torch.sort(na, 1).values.cpu(), torch.sort(a, 1).values)
    out = torch.empty(5, 7, device="npu")
    torch.atan2(na, nb, out=out)
    torch.testing.assert_close(out.cpu(), torch.atan2(a, b))


def test_synchronous_items_and_their_result_transfers(items_run_twice):
    a, _, na, _ = _inputs()
    # Data-dependent sizes: run synchronously, results moved by transfer work.
    assert torch.equal(torch.nonzero(na > 0).cpu(), torch.nonzero(a > 0))
    assert torch.equal(torch.masked_select(na, na > 0).cpu(), torch.masked_select(a, a > 0))
    values, counts = torch.unique(na.round(), return_counts=True)
    cpu_values, cpu_counts = torch.unique(a.round(), return_counts=True)
    assert torch.equal(values.cpu(), cpu_values) and torch.equal(counts.cpu(), cpu_counts)


def test_in_place_items_do_their_work_again(items_run_twice):
    a, b, na, nb = _inputs()
    na.add_(nb)  # fast path
    torch.testing.assert_close(na.cpu(), a + 2 * b)
    index = torch.tensor([0, 2])
    x = torch.zeros(5, 3).npu()
    x.index_add_(0, index.npu(), torch.ones(2, 3).npu())  # generic executor
    expected = torch.zeros(5, 3)
    expected[[0, 2]] = 2
    assert torch.equal(x.cpu(), expected)


@pytest.mark.parametrize("op", [
    lambda: torch.rand(6, 9, device="npu"),
    lambda: torch.randn(6, 9, device="npu"),
    lambda: torch.nn.functional.dropout(torch.ones(6, 9, device="npu"), 0.5),
    lambda: torch.multinomial(torch.ones(4, 10, device="npu"), 3),
], ids=["rand", "randn", "dropout", "multinomial"])
def test_random_items_draw_the_same_numbers_at_every_run(op):
    """A run reads the generator state the launch reserved and leaves it as
    it found it: run twice, an item draws what it draws once."""
    torch.manual_seed(1234)
    once = op().cpu()
    with work_item_runs(2):
        torch.manual_seed(1234)
        twice = op().cpu()
    assert torch.equal(once, twice)
