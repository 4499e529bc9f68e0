"""The graph tests leave no npu memory allocated behind them: graphed
callables and failed captures hold reference cycles (a module's forward
refers to its graphs, which refer to the module; a traceback to its frames),
so each test ends with a collection. Each test also starts and ends with a
fresh Dynamo state (the compile tests relied on it)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    # Each test compiles from a clean Dynamo state and leaves none behind.
    import torch._dynamo

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(autouse=True)
def _collect_cycles(npu_bytes_allocated: Callable[[], int]) -> Iterator[None]:
    yield
    # A full collection costs 0.1-0.4 s here (Dynamo and Inductor hold
    # hundreds of thousands of objects): pay it only when a cycle may be
    # what keeps npu memory allocated.
    if npu_bytes_allocated():
        gc.collect()


# The wide compiled OpInfo scan (test_compile_opinfo_full.py): the count of
# cases per class (Note [Classes of a compiled OpInfo case]) and the cases of
# every class that does not pass. Known failures (xfail) count in their class;
# untested cases and the skip of a run that did not ask for the scan are
# never passes.
COMPILE_OPINFO_TEST = "test_compile_opinfo_full.py::test_compiled_case["


def pytest_terminal_summary(terminalreporter) -> None:
    from _compile_opinfo import CLASSES

    cases: dict[str, list[str]] = {cls: [] for cls in CLASSES}
    for reports in terminalreporter.stats.values():
        for report in reports:
            nodeid = getattr(report, "nodeid", "")
            if COMPILE_OPINFO_TEST not in nodeid or getattr(report, "when", None) != "call":
                continue
            for name, value in report.user_properties:
                if name == "compile_opinfo_class":
                    cases[value].append(nodeid.split("[", 1)[1].rstrip("]"))
    total = sum(len(v) for v in cases.values())
    if not total:
        return
    terminalreporter.write_sep("-", "compiled OpInfo scan")
    terminalreporter.write_line(
        f"Compiled OpInfo scan: {len(cases['pass'])}/{total} cases pass, "
        + ", ".join(f"{len(cases[cls])} {cls}" for cls in CLASSES if cls != "pass"))
    for cls in CLASSES:
        if cls != "pass" and cases[cls]:
            terminalreporter.write_line(f"{cls}: " + ", ".join(sorted(cases[cls])))
