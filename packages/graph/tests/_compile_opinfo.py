"""Compiling an OpInfo entry for npu and judging the result against eager
npu: shared by the sampled test (test_compile_opinfo_sample.py) and the full
scan (test_compile_opinfo_full.py).

Note [Classes of a compiled OpInfo case]
A case is one (op, dtype, mode) with mode "fwd" (the op's results) or
"grad" (the gradients of a position-weighted sum of its floating results,
computed inside the compiled function, so that the backward graph is
compiled too). Its first samples that eager npu runs are compiled and
compared with eager npu, and the case is, from best to worst:

- ``pass``: every result agrees and every kernel ran as MLIR;
- ``loud_fallback``: every result agrees, but some kernel ran its aten ops
  eagerly and said so (NPUKernelFallbackWarning); results count;
- ``error``: compiling or running the compiled function raised;
- ``wrong_with_warning``: some result differs, and a kernel had fallen back
  with a warning (the user was told something is off, if not what);
- ``silent_wrong``: some result differs and nothing said so: the worst bug;
- ``untested``: no sample of the op runs eagerly on npu in this dtype and
  mode, so nothing was compared. Never a pass.

Only ``pass`` and ``loud_fallback`` pass; the scan prints the counts per
class (conftest.py) and each failing class raises its own exception type,
so that a known failure (compile_opinfo_known_failures.json) names the class
it fails in and a change of class is a new failure.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import torch
import torch._dynamo
from torch.testing._internal.common_methods_invocations import op_db

from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

# Families left out of every compiled OpInfo test: random ops (compiled and
# eager draw different numbers), data-dependent shapes, linear algebra
# (extern kernels that are not compiled), sorting and in-place factories.
EXCLUDED_PREFIXES = (
    "linalg", "fft", "sparse", "special.", "_", "empty", "rand", "normal", "bernoulli", "multinomial",
    "cholesky", "svd", "lu", "qr", "eig", "ormqr", "geqrf", "pca", "triangular", "nonzero", "unique",
    "masked_select", "histc", "bincount", "item", "tolist", "allclose", "equal", "combinations", "sort",
    "argsort", "topk", "kthvalue", "median", "nanmedian", "mode", "put", "take", "resize", "new_",
    "full_like", "ones_like", "zeros_like", "uniform", "cauchy", "exponential", "geometric", "log_normal",
    "jiterator", "nn.functional.conv", "nn.functional.dropout", "nn.functional.feature_alpha",
    "nn.functional.alpha_dropout", "nn.functional.rrelu", "nn.functional.fractional_max_pool",
)

CLASSES = ("pass", "loud_fallback", "error", "wrong_with_warning", "silent_wrong", "untested")


class CompileError(AssertionError):
    """Compiling or running the compiled function raised (class ``error``)."""


class WrongWithWarning(AssertionError):
    """A compiled result differs from eager; a kernel had fallen back with a
    warning (class ``wrong_with_warning``)."""


class SilentWrongResult(AssertionError):
    """A compiled result differs from eager and nothing warned (class
    ``silent_wrong``)."""


FAILURE_TYPES: dict[str, type[AssertionError]] = {
    "error": CompileError,
    "wrong_with_warning": WrongWithWarning,
    "silent_wrong": SilentWrongResult,
}


def op_name(op: Any) -> str:
    """The OpInfo's name as test ids spell it: ``name[.variant]``."""
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def eligible_ops(dtype: torch.dtype) -> list:
    """The OpInfos the compiled tests cover in ``dtype`` (supported on the
    CPU, not in EXCLUDED_PREFIXES), sorted by name and variant."""
    return sorted((op for op in op_db if dtype in op.supported_dtypes("cpu")
                   and not op.name.startswith(EXCLUDED_PREFIXES)), key=lambda op: (op.name, op.variant_test_name))


def has_grad_case(op: Any, dtype: torch.dtype) -> bool:
    """Whether ``op`` has a "grad" case in ``dtype``."""
    return dtype.is_floating_point and op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")


def tolerances(dtype: torch.dtype) -> dict[str, float]:
    """atol/rtol of compiled against eager npu. Compiled half-precision math
    runs in float32 (Note [Half-precision math in float32]) where eager
    rounds after each op, hence a few units of the last place; integers
    agree exactly."""
    if dtype in (torch.float16,):
        return {"atol": 1e-2, "rtol": 1e-2}
    if dtype == torch.bfloat16:
        return {"atol": 1.6e-2, "rtol": 1.6e-2}
    if dtype.is_floating_point:
        return {"atol": 1e-4, "rtol": 1e-4}
    return {"atol": 0.0, "rtol": 0.0}


def _result_tolerances(expected: Any, dtype: torch.dtype) -> dict[str, float]:
    # Float math of integers (cos of int64) gives float32: its results are
    # judged as float32, not exactly (they differed by an ulp).
    floats = [t.dtype for t in _tensors(expected) if t.is_floating_point()]
    return tolerances(floats[0] if floats and not dtype.is_floating_point else dtype)


@dataclasses.dataclass
class Outcome:
    """What compiling one case gave (Note [Classes of a compiled OpInfo case])."""

    cls: str
    samples: int = 0  # samples compared
    detail: str = ""  # the error or the mismatch, first lines
    warnings: list[str] = dataclasses.field(default_factory=list)  # fallback warnings, first of each kind

    def raise_if_failing(self, case: str) -> None:
        """Raise the class's exception when the case does not pass."""
        if self.cls in FAILURE_TYPES:
            fallback = f"\nfallback warnings: {self.warnings}" if self.warnings else ""
            raise FAILURE_TYPES[self.cls](f"{case}: {self.cls}: {self.detail}{fallback}")


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


class _NoGradient(Exception):
    """The sample has no floating result or no input that requires grad."""


def _case_function(op: Any, mode: str):
    def forward(*args, **kwargs):
        return op(*args, **kwargs)

    def gradients(*args, **kwargs):
        outputs = [t for t in _tensors(op(*args, **kwargs)) if t.requires_grad and t.is_floating_point()]
        inputs = [t for t in _tensors((args, kwargs)) if t.requires_grad]
        if not outputs or not inputs:
            raise _NoGradient
        # Weights by position, so that a gradient routed to the wrong
        # element shows (a plain sum hides permutations).
        total = sum((o.float() * (torch.arange(o.numel(), device=o.device).reshape(o.shape) % 7 + 1)).sum()
                    for o in outputs)
        return torch.autograd.grad(total, inputs, allow_unused=True)

    return gradients if mode == "grad" else forward


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:300]}" if text else type(error).__name__


def compile_case(op: Any, dtype: torch.dtype, mode: str, max_samples: int | None) -> Outcome:
    """Compile ``op``'s first ``max_samples`` samples (None: all) in
    ``dtype`` and ``mode`` on npu and judge them against eager npu. Sample
    inputs are made here, on each call: never at import (Note in the graph
    tests' conftest.py about allocations that outlive a test)."""
    fn = _case_function(op, mode)
    samples = op.sample_inputs("npu", dtype, requires_grad=(mode == "grad"))
    fallbacks: list[str] = []
    checked = 0
    for sample in _first(samples, max_samples):
        try:
            expected = fn(sample.input, *sample.args, **sample.kwargs)
        except Exception:  # a sample eager npu refuses (or without gradients): not compiled code's subject
            continue
        torch._dynamo.reset()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                actual = torch.compile(fn, dynamic=False)(sample.input, *sample.args, **sample.kwargs)
        except Exception as error:
            return Outcome("error", checked, _first_line(error), _distinct(fallbacks))
        fallbacks += [str(w.message) for w in caught if issubclass(w.category, NPUKernelFallbackWarning)]
        try:
            torch.testing.assert_close(actual, expected, equal_nan=True, **_result_tolerances(expected, dtype))
        except AssertionError as mismatch:
            cls = "wrong_with_warning" if fallbacks else "silent_wrong"
            return Outcome(cls, checked, f"{str(mismatch).strip()[:600]}\nsample: {sample!r:.400}",
                           _distinct(fallbacks))
        checked += 1
    if checked == 0:
        return Outcome("untested", 0, "no sample runs eagerly on npu")
    return Outcome("loud_fallback" if fallbacks else "pass", checked, "", _distinct(fallbacks))


def _first(samples: Iterable, count: int | None) -> list:
    taken = []
    for sample in samples:
        if count is not None and len(taken) == count:
            break
        taken.append(sample)
    return taken


def _distinct(messages: Sequence[str]) -> list[str]:
    # The first line of each kind of fallback, at most three: enough to
    # group cases by cause without pages of MLIR.
    seen: list[str] = []
    for message in messages:
        head = message.strip().splitlines()[0][:300] if message.strip() else ""
        if head not in seen:
            seen.append(head)
    return seen[:3]
