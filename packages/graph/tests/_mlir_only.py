"""Running a compiled function and failing if any of its kernels fell back
to running its aten ops eagerly (shared by the fix tests)."""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch
import torch._dynamo

from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning


def compiled_as_mlir(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn`` compiled (static shapes) and run on ``args``; fails if a
    kernel fell back to eager."""
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = torch.compile(fn, dynamic=False)(*args)
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, NPUKernelFallbackWarning)]
    assert not fallbacks, fallbacks
    return actual
