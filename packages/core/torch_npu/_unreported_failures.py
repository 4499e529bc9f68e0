"""Device-work failures that no synchronization reported before exit.

An error inside device work is raised by the next synchronizing call that
depends on it (``.cpu()``, ``.item()``, ``torch.npu.synchronize()``, ...).
A script that never synchronizes after the failure would otherwise end with
status 0 although some of its results were never computed. At exit this
synchronizes every device the process used; a failure found then is printed
to stderr and the process exits with status 1.

Registered after the autograd drain (``_autograd_exit``), so that it runs
before it (exit handlers run in reverse order): the drain's copy to the host
synchronizes too, and would swallow the failure.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys

from . import _C


def _unreported_failures() -> list[str]:
    if not _C._is_initialized():
        return []
    failures = []
    for index in range(_C._get_device_count()):
        if not _C._is_device_initialized(index):
            continue
        try:
            _C._synchronize(index)
        except RuntimeError as error:  # the device-work failure, reported now
            failures.append(f"npu:{index}: {error}")
    return failures


def _report_at_exit() -> None:
    try:
        failures = _unreported_failures()
    except Exception:  # noqa: BLE001 - never turn a normal exit into a crash
        return
    if not failures:
        return
    message = (
        "torch_npu: device work failed, and no synchronizing call reported it "
        "before the program ended (results computed after it are wrong):\n"
        + "\n".join(failures)
        + "\nExiting with status 1. Synchronize (torch.npu.synchronize(), .cpu(), "
        ".item()) where the results are needed to see such errors where they happen.\n"
    )
    # os._exit skips the exit handlers registered before this one (logging's
    # among them): flush what they would have flushed.
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    sys.stderr.write(message)
    sys.stderr.flush()
    os._exit(1)


def register() -> None:
    atexit.register(_report_at_exit)
