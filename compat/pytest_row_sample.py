"""pytest plugin: runs a deterministic part of the collected tests.

Note [Rows of another torch run half the tests]: CI has one budget for the
default row and every other row (Note [What another torch's row runs]), and
a row of another torch runs nearly the whole suite after building every
package again. So such a row runs half of it, ``--row-sample=K/N`` with N=2:
a test runs when the CRC-32 of its node id is K modulo N, so every module
and most parametrized tests keep some of their cases. ./dev takes K from
the commit being tested, so consecutive commits run the two halves; the
recorded command carries the option, and a rerun with the same K runs the
same tests. Tests left out are deselected, never reported as passed or
skipped, and the terminal summary says how many ran.
"""

from __future__ import annotations

import zlib

import pytest

# (tests kept, tests collected, the option's text), for the summary.
_COUNTS = pytest.StashKey[tuple]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--row-sample", default=None, metavar="K/N",
                     help="run only the tests whose node id's CRC-32 is K modulo N "
                          "(Note [Rows of another torch run half the tests])")


def _sample(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 0 <= int(k) < int(n)):
        raise pytest.UsageError(f"--row-sample={text!r}: expected K/N with 0 <= K < N, e.g. 0/2")
    return int(k), int(n)


def in_sample(nodeid: str, k: int, n: int) -> bool:
    """Whether the test ``nodeid`` is in part ``k`` of ``n``."""
    return zlib.crc32(nodeid.encode()) % n == k


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    option = config.getoption("--row-sample")
    if option is None:
        return
    k, n = _sample(option)
    kept, left = [], []
    for item in items:
        (kept if in_sample(item.nodeid, k, n) else left).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
    config.stash[_COUNTS] = (len(kept), len(items), option)
    items[:] = kept


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if _COUNTS in config.stash:
        kept, total, option = config.stash[_COUNTS]
        terminalreporter.write_line(f"row sample {option}: ran {kept} of the {total} tests collected "
                                    "(Note [Rows of another torch run half the tests])")
