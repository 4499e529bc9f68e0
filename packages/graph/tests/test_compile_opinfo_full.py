"""The wide scan of torch.compile on npu: every eligible OpInfo
(_compile_opinfo.eligible_ops) in each scanned dtype, forward ("fwd") and,
where the op has a backward in that dtype, gradients ("grad"), each compiled
and compared with eager npu, one test id per ``op-dtype-mode``. Each case is
classified (Note [Classes of a compiled OpInfo case]); conftest.py prints
the counts per class and the ops of each class that does not pass.

Too long for CI (about 40 min on 2 cores for the default dtypes, with 2
samples): it runs only with ``TORCH_NPU_COMPILE_OPINFO_FULL=1`` (``nox -s
compile_opinfo_full``, which records a passing run in compat/runs.json with
COMPAT_RECORD=1). Without it, the module collects one test, which skips and
says how to run the scan; test_compile_opinfo_sample.py is the sampled run
CI makes. A skipped or untested case is never counted as a pass.

Settings (environment):

* ``TORCH_NPU_COMPILE_OPINFO_DTYPES``: dtypes of "fwd" cases, default
  ``float32,float16,bfloat16,int64``;
* ``TORCH_NPU_COMPILE_OPINFO_GRAD_DTYPES``: dtypes of "grad" cases,
  default ``float32``;
* ``TORCH_NPU_COMPILE_OPINFO_MAX_SAMPLES``: samples compared per case,
  default 2 (0: all);
* ``TORCH_NPU_COMPILE_OPINFO_SHARD=i/n``: only the cases whose position is
  i modulo n, so that n processes share the scan;
* ``TORCH_NPU_COMPILE_OPINFO_REPORT=path``: one JSON line per case (op,
  dtype, mode, class, detail, fallback warnings) appended to ``path``.

Known failures live in compile_opinfo_known_failures.json beside this file:
``{"op", "dtype", "mode", "class", "reason"}`` entries, each a strict xfail
that expects its class's exception, so the list can only shrink and a case
that fails in another class fails the scan.
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest
import torch

from _compile_opinfo import FAILURE_TYPES, compile_case, eligible_ops, has_grad_case, op_name
from torch_npu.graph.compile import _mlir

FULL = os.environ.get("TORCH_NPU_COMPILE_OPINFO_FULL", "0") == "1"
KNOWN_FAILURES_FILE = pathlib.Path(__file__).with_name("compile_opinfo_known_failures.json")


def _dtypes(variable: str, default: str) -> list[torch.dtype]:
    names = [n.strip() for n in os.environ.get(variable, default).split(",") if n.strip()]
    dtypes = []
    for name in names:
        dtype = getattr(torch, name, None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"{variable}: {name!r} is not a torch dtype (e.g. float32, bfloat16, int64)")
        dtypes.append(dtype)
    return dtypes


def _max_samples() -> int | None:
    value = int(os.environ.get("TORCH_NPU_COMPILE_OPINFO_MAX_SAMPLES", "2"))
    return None if value <= 0 else value


def _shard() -> tuple[int, int]:
    text = os.environ.get("TORCH_NPU_COMPILE_OPINFO_SHARD", "0/1")
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 0 <= int(index) < int(count)):
        raise ValueError(f"TORCH_NPU_COMPILE_OPINFO_SHARD={text!r}: expected i/n with 0 <= i < n")
    return int(index), int(count)


def _known_failures() -> dict[tuple[str, str, str], dict]:
    entries = json.loads(KNOWN_FAILURES_FILE.read_text())
    known = {}
    for entry in entries:
        if entry["class"] not in FAILURE_TYPES:
            raise ValueError(f"{KNOWN_FAILURES_FILE.name}: class {entry['class']!r} of {entry['op']} is not one of "
                             f"{', '.join(FAILURE_TYPES)}")
        known[(entry["op"], entry["dtype"], entry["mode"])] = entry
    return known


def _cases() -> list:
    if not FULL:
        return [pytest.param(None, None, None, id="scan-not-requested")]
    known = _known_failures()
    cases = []
    dtypes = _dtypes("TORCH_NPU_COMPILE_OPINFO_DTYPES", "float32,float16,bfloat16,int64")
    grad_dtypes = _dtypes("TORCH_NPU_COMPILE_OPINFO_GRAD_DTYPES", "float32")
    for dtype in dict.fromkeys(dtypes + grad_dtypes):
        for op in eligible_ops(dtype):
            modes = (["fwd"] if dtype in dtypes else []) + (["grad"] if dtype in grad_dtypes
                                                             and has_grad_case(op, dtype) else [])
            cases += [(op, dtype, mode) for mode in modes]
    index, count = _shard()
    params = []
    for op, dtype, mode in cases[index::count]:
        dtype_name = str(dtype).removeprefix("torch.")
        entry = known.get((op_name(op), dtype_name, mode))
        marks = ([pytest.mark.xfail(reason=entry["reason"], raises=FAILURE_TYPES[entry["class"]], strict=True)]
                 if entry else [])
        params.append(pytest.param(op, dtype, mode, id=f"{op_name(op)}-{dtype_name}-{mode}", marks=marks))
    return params


@pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")
@pytest.mark.parametrize("op, dtype, mode", _cases())
def test_compiled_case(op, dtype, mode, record_property):
    if op is None:
        pytest.skip("the wide compiled OpInfo scan runs with TORCH_NPU_COMPILE_OPINFO_FULL=1 "
                    "(nox -s compile_opinfo_full); test_compile_opinfo_sample.py is its sampled run")
    outcome = compile_case(op, dtype, mode, _max_samples())
    dtype_name = str(dtype).removeprefix("torch.")
    record_property("compile_opinfo_class", outcome.cls)
    report = os.environ.get("TORCH_NPU_COMPILE_OPINFO_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(json.dumps({"op": op_name(op), "dtype": dtype_name, "mode": mode, "class": outcome.cls,
                                "samples": outcome.samples, "detail": outcome.detail,
                                "warnings": outcome.warnings}) + "\n")
    if outcome.cls == "untested":
        # Not a pass: conftest.py counts these apart.
        pytest.skip(f"untested: {outcome.detail}")
    outcome.raise_if_failing(f"{op_name(op)} {dtype_name} {mode}")
