"""pytest plugin: names the node that is running, for the CANN reach log.

Note [Which tests reach CANN's features] (cann_reach.py): the simulator and
torch_npu log each question about CANN's features or version with the value
of NPU_SIM_CANN_REACH_TAG; this plugin keeps it set to the node being
collected or run, in os.environ, so the process itself (getenv) and the
processes a test starts see it. ``./dev test`` loads it for the default row
(``-p compat.pytest_cann_reach``); it does nothing without the log variable.
"""

from __future__ import annotations

import os

from .cann_reach import LOG_VARIABLE, TAG_VARIABLE

_ACTIVE = bool(os.environ.get(LOG_VARIABLE))


def _tag(nodeid: str) -> None:
    if _ACTIVE:
        os.environ[TAG_VARIABLE] = nodeid


def pytest_collectstart(collector) -> None:  # a module's import runs its top-level code
    _tag(collector.nodeid)


def pytest_runtest_logstart(nodeid: str, location) -> None:  # before the test's setup
    _tag(nodeid)


def pytest_sessionfinish(session, exitstatus) -> None:
    if _ACTIVE:
        os.environ.pop(TAG_VARIABLE, None)
