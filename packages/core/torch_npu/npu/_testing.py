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


#: What a synchronizing operation says under set_sync_debug_mode.
SYNC_MESSAGE = "called a synchronizing NPU operation"


@contextlib.contextmanager
def sync_debug_mode(mode: str) -> Iterator[list[str]]:
    """Sets :func:`torch.npu.set_sync_debug_mode` to ``mode`` inside the
    block and yields the list of synchronizing-operation warnings the block
    raised (filled as it runs); the mode is ``"default"`` again after it."""
    import warnings

    caught: list[str] = []
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        torch.npu.set_sync_debug_mode(mode)
        try:
            yield caught
        finally:
            torch.npu.set_sync_debug_mode("default")
            caught.extend(str(w.message) for w in records if SYNC_MESSAGE in str(w.message))
