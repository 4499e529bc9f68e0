"""The graph tests leave no npu memory allocated behind them: graphed
callables and failed captures hold reference cycles (a module's forward
refers to its graphs, which refer to the module; a traceback to its frames),
so each test ends with a collection. Each test also starts and ends with a
fresh Dynamo state (the compile tests relied on it)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    # Each test compiles from a clean Dynamo state and leaves none behind.
    import torch._dynamo

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(autouse=True)
def _collect_cycles() -> Iterator[None]:
    yield
    gc.collect()
