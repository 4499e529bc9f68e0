"""The graph tests leave no npu memory allocated behind them: graphed
callables and failed captures hold reference cycles (a module's forward
refers to its graphs, which refer to the module; a traceback to its frames),
so each test ends with a collection."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _collect_cycles() -> Iterator[None]:
    yield
    gc.collect()
