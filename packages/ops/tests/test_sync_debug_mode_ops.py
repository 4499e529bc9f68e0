"""torch.npu.set_sync_debug_mode for ops (Note [Synchronizing operations],
core's csrc/npu/SyncDebugMode.h): ops whose result sizes depend on the
values wait for the device, as on CUDA, and say so; ops that the executor
runs synchronously for reasons of its own do not."""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401
from torch_npu.npu._testing import SYNC_MESSAGE, sync_debug_mode


def test_ops_with_value_dependent_sizes_warn_and_refuse():
    x = torch.tensor([0.0, 2.0, 0.0, 3.0, 2.0]).npu()
    ops = {
        "nonzero": lambda: x.nonzero(),
        "masked_select": lambda: x.masked_select(x > 1),
        "boolean index": lambda: x[x > 1],
        "unique": lambda: torch.unique(x),
        "argwhere": lambda: torch.argwhere(x),
        "repeat_interleave": lambda: torch.repeat_interleave(torch.tensor([1, 2]).npu()),
    }
    for name, fn in ops.items():
        with sync_debug_mode("warn") as caught:
            fn()
        assert caught, name
        with sync_debug_mode("error"), pytest.raises(RuntimeError, match=SYNC_MESSAGE):
            fn()
    assert x.nonzero().cpu().flatten().tolist() == [1, 3, 4]


def test_ops_queued_or_synchronous_for_the_backends_own_reasons_do_not():
    x = torch.randn(4, 6).npu()
    index = torch.tensor([0, 2]).npu()
    with sync_debug_mode("error") as caught:
        y = torch.nn.functional.layer_norm(x, (6,))
        y = y + x * 2
        y.sum(dim=1)
        x[index]
        torch.nn.functional.batch_norm(x, None, None, training=True)
    assert caught == []
