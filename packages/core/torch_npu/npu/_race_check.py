"""The simulator's stream race detector (Note [Stream race detection]).

``NPU_SIM_RACE_CHECK=1`` turns it on for a whole run; these functions turn it
on and off inside one (tests, benchmarks). While on, device work that touches
memory another stream used without being ordered after that use (an event
wait, ``wait_stream``, a synchronize, ``record_stream``) fails at its launch
with a ``RuntimeError`` naming both accesses.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from .. import _C


def is_enabled() -> bool:
    """Whether the stream race detector is on."""
    return bool(_C._npu_race_check_enabled())


def set_enabled(enabled: bool) -> None:
    """Turns the detector on or off; turning it off forgets what it tracked.

    Raises ``RuntimeError`` on a runtime without a detector (CANN).
    """
    from . import _lazy_init

    _lazy_init()
    _C._npu_set_race_check_enabled(bool(enabled))


@contextlib.contextmanager
def enabled(on: bool = True) -> Iterator[None]:
    """Runs the block with the detector on (or off), then restores it."""
    before = is_enabled()
    set_enabled(on)
    try:
        yield
    finally:
        set_enabled(before)
