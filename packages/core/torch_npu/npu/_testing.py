"""Testing aids of the npu runtime (not public API)."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from .. import _C


@contextlib.contextmanager
def work_item_runs(runs: int) -> Iterator[None]:
    """Runs every device work item launched inside the block ``runs`` times
    in a row, as replays of a captured graph would (Note [Device work items
    run many times], csrc/npu/NPUWork.h)."""
    torch.npu.synchronize()
    _C._set_work_runs_for_testing(runs)
    try:
        yield
    finally:
        torch.npu.synchronize()
        _C._set_work_runs_for_testing(1)
