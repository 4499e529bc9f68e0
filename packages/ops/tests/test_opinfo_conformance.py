"""OpInfo conformance: every entry of PyTorch's OpInfo database runs on npu
and gives what it gives on the CPU.

For each OpInfo of ``torch.testing._internal.common_methods_invocations.op_db``
(one test id per ``name[.variant]``), for each tested dtype among those the
OpInfo supports on CPU, and for each of its sample inputs:

* the sample is mirrored on npu (every tensor of input, args and kwargs,
  recursively, with the same sizes, strides, storage offset, values and
  ``requires_grad``, the whole underlying storage copied; tensors shared
  within a sample stay shared; a "cpu" device argument becomes npu; the few
  tensor arguments an op requires on the host, as on CUDA, stay there:
  ``HOST_ARGUMENTS``), then the op runs on both (a factory sample without
  tensors or device, e.g. ``arange(2)``, runs under ``torch.device("npu")``);
* the results are compared with ``torch.testing.assert_close`` and its
  dtype-based tolerances (exact dtypes, ``equal_nan=True``); every result
  tensor must be on npu. A sample that raises on the CPU must raise on npu;
* where the OpInfo supports autograd for the dtype (``op.supports_autograd``
  and a floating or complex dtype in ``op.supported_backward_dtypes("cpu")``)
  the sample is made with ``requires_grad=True`` and the gradients of
  ``sum(output * w)`` (``w``: fixed random weights, the same on both sides;
  i.e. a vector-Jacobian product) w.r.t. every input that requires grad are
  compared too.

Random ops (sampling ops, dropout, ``empty*`` whose values are uninitialised
memory: ``RANDOM_OPS`` below, plus every OpInfo whose ATen op carries
``torch.Tag.nondeterministic_seeded``) cannot give the CPU's values: npu
draws from its own generator. For them (and for the samples of
``RANDOM_SAMPLES``, dropout with p > 0) only the structure, shapes and dtypes
of results and gradients are compared, not the values.

An entry passes when all its dtypes and samples pass. Known failures live in
``opinfo_known_failures.json`` beside this file: one entry per failing
(op, variant, dtype or "*"), with a reason. An OpInfo with entries for the
dtypes tested is marked ``xfail(strict=True)``, and the test raises the
expected failure only when exactly the listed dtypes fail: a failure in
another dtype is a real failure, and a listed dtype that now passes fails the
test until its entry is removed, so the list can only shrink. Entries with
``"checker": true`` fail only with the simulator's memory checker on
(``NPU_SIM_CHECKER=1``, as ``./dev test`` runs) and apply only then. Nothing
is skipped: an OpInfo without any CPU dtype (CUDA-only) fails, and is listed.

Modes (the CI budget: the whole suite must stay well under 30 min on 2
cores):

* default (``./dev test``): a representative set of dtypes per OpInfo,
  those supported among float32, float64, int64 (else the first supported
  integer dtype), bool, complex64 (else complex128), bfloat16 and float16
  (or, if none, the first supported dtype, e.g. float8 for _scaled_mm);
  and the first ``DEFAULT_MAX_SAMPLES`` samples of each (op, dtype);
  about 3.5 min for the 702 entries on 2 cores with the checker on;
* ``TORCH_NPU_OPINFO_FULL=1``: every supported dtype, every sample, about
  8.5 min;
* ``TORCH_NPU_OPINFO_MAX_SAMPLES=N`` overrides the number of samples
  (0: all);
* ``TORCH_NPU_OPINFO_SHARD=i/n`` (0 <= i < n) collects only the OpInfos whose
  position in the sorted list is i modulo n, so n processes or CI jobs share
  the run deterministically.

Known-failure records are made in the full mode. One for a dtype outside the
mode's dtypes is ignored, and so is one whose ``"sample"`` (the index of the
first failing sample, 0 if absent) is past the mode's sample limit, so that
the records hold in every mode.

At the end of the run conftest.py prints
``OpInfo conformance: N/M entries pass (x%)`` and the per-dtype totals.
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib
from collections.abc import Mapping, Sequence

import pytest
import torch

import torch_npu  # noqa: F401
from _random_ops import RANDOM_OPS

try:
    from torch.testing._internal.common_methods_invocations import op_db
except ModuleNotFoundError as error:  # torch's test helpers need expecttest
    raise ImportError(
        f"the OpInfo conformance test needs torch's test dependencies ({error}): "
        "pip install expecttest (./dev lists it among the test requirements)"
    ) from error

KNOWN_FAILURES_FILE = pathlib.Path(__file__).with_name("opinfo_known_failures.json")
DEFAULT_MAX_SAMPLES = 10

FULL = os.environ.get("TORCH_NPU_OPINFO_FULL", "0") == "1"
CHECKER = os.environ.get("NPU_SIM_CHECKER", "0") == "1"


def _max_samples() -> int | None:
    text = os.environ.get("TORCH_NPU_OPINFO_MAX_SAMPLES")
    if text is None:
        return None if FULL else DEFAULT_MAX_SAMPLES
    value = int(text)
    return None if value <= 0 else value


MAX_SAMPLES = _max_samples()

# Random ops (_random_ops.RANDOM_OPS): their VALUES ARE NOT COMPARED; only
# the structure, shapes and dtypes of results and gradients are. The list
# holds the OpInfos whose ATen op (if any) is not tagged
# nondeterministic_seeded; is_random() adds the tagged ones.

# Tensor arguments (positions in sample.args) that the op requires on the
# host, as on CUDA: they are not moved to npu.
HOST_ARGUMENTS = {
    "tensor_split": (0,),  # tensor_indices_or_sections must be on the CPU
}

REPRESENTATIVE = [torch.float32, torch.float64, torch.bool, torch.bfloat16, torch.float16]
INTEGERS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
COMPLEX = [torch.complex64, torch.complex128]


def entry_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtypes_to_test(op) -> list[torch.dtype]:
    supported = op.supported_dtypes("cpu")
    if FULL:
        return sorted(supported, key=dtype_name)
    chosen = [d for d in REPRESENTATIVE if d in supported]
    chosen += [d for d in INTEGERS if d in supported][:1]
    chosen += [d for d in COMPLEX if d in supported][:1]
    if not chosen and supported:  # float8 or unsigned-only ops: their first dtype
        chosen = sorted(supported, key=dtype_name)[:1]
    return sorted(chosen, key=dtype_name)


# Ops that are random only in some samples (dropout with p > 0 in training):
# a predicate of the sample.
RANDOM_SAMPLES = {
    # tagged nondeterministic_seeded for its dropout_p argument only
    "nn.functional.scaled_dot_product_attention": lambda s: (s.kwargs.get("dropout_p") or 0.0) > 0,
    # args[9] is dropout_p
    "nn.functional.multi_head_attention_forward": lambda s: s.kwargs.get("training", True) and s.args[9] > 0,
}


def is_random(op) -> bool:
    if op.name in RANDOM_OPS:
        return True
    if op.name in RANDOM_SAMPLES:
        return False
    name = op.aten_name or op.name
    if "." in name:
        # A Python-level function (signal.windows.exponential is not
        # aten::exponential): random only if listed above.
        return False
    packet = getattr(torch.ops.aten, name, None)
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return False
    return any(
        torch.Tag.nondeterministic_seeded in getattr(packet, overload).tags
        for overload in packet.overloads()
    )


# The dropout family draws random numbers only with p > 0 in training mode;
# their other samples are deterministic, and compared.
DROPOUT_OPS = {
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
}


def _dropout_sample_is_random(sample) -> bool:
    p = sample.kwargs.get("p", sample.args[0] if sample.args else 0.5)
    return p > 0 and sample.kwargs.get("training", True)


def sample_is_random(op, sample) -> bool:
    if op.name in DROPOUT_OPS:
        return _dropout_sample_is_random(sample)
    return is_random(op) or bool(op.name in RANDOM_SAMPLES and RANDOM_SAMPLES[op.name](sample))


# ---------------------------------------------------------------------------
# Known failures


def load_known_failures() -> dict[str, list[dict]]:
    """entry name -> its known-failure records that apply in this run."""
    records = json.loads(KNOWN_FAILURES_FILE.read_text())["failures"]
    known: dict[str, list[dict]] = {}
    for record in records:
        if record.get("checker", False) and not CHECKER:
            continue
        if MAX_SAMPLES is not None and record.get("sample", 0) >= MAX_SAMPLES:
            continue  # the failing sample is past the samples this mode runs
        known.setdefault(record["op"], []).append(record)
    return known


KNOWN = load_known_failures()


class KnownFailure(Exception):
    """Raised when an entry fails exactly as its known-failure records say."""


# ---------------------------------------------------------------------------
# Mirroring samples on npu


class Mirror:
    """Copies CPU values to npu, keeping tensors that are shared, shared."""

    def __init__(self):
        self.memo: dict[int, torch.Tensor] = {}
        self.leaves: list[tuple[torch.Tensor, torch.Tensor]] = []  # (cpu, npu) requiring grad

    def tensor(self, t: torch.Tensor) -> torch.Tensor:
        if id(t) in self.memo:
            return self.memo[id(t)]
        if t.device.type != "cpu":
            raise TypeError(f"cannot mirror a tensor on {t.device}")
        if t.layout != torch.strided:
            # A sparse tensor has no storage to share: its members move.
            out = t.detach().to("npu")
            if t.requires_grad:
                out.requires_grad_(True)
                self.leaves.append((t, out))
            self.memo[id(t)] = out
            return out
        base = t._base
        # The whole storage, then the same view of it: the op sees the same
        # sizes, strides and offset, and ops that read past the view
        # (as_strided) read the same values.
        storage = t.untyped_storage()
        whole = torch.empty(0, dtype=t.dtype).set_(storage, 0, (storage.nbytes() // t.element_size(),))
        if (t.grad_fn is None and base is not None and base.requires_grad
                and not t.is_neg() and not t.is_conj()):
            # A view made in no-grad mode of a tensor that requires grad (the
            # istft samples' `window[:8]`): autograd treats it as a leaf that
            # receives no gradient. A fresh npu leaf would receive one: make
            # it the same way, as a no-grad view of storage that requires grad.
            npu_whole = whole.detach().to("npu").requires_grad_(True)
            with torch.no_grad():
                out = npu_whole.as_strided(t.shape, t.stride(), t.storage_offset())
            if t.requires_grad:
                self.leaves.append((t, out))
            self.memo[id(t)] = out
            return out
        with torch.no_grad():
            out = whole.to("npu").as_strided(t.shape, t.stride(), t.storage_offset())
            # The conjugate and negative bits are views' flags, not values.
            if t.is_neg():
                out = out._neg_view()
            if t.is_conj():
                out = out.conj()
        if t.requires_grad:
            out.requires_grad_(True)
            self.leaves.append((t, out))
        self.memo[id(t)] = out
        return out

    def value(self, v):
        if isinstance(v, torch.Tensor):
            return self.tensor(v)
        # A device argument names the sample's device: npu's is npu.
        if isinstance(v, torch.device) and v.type == "cpu":
            return torch.device("npu")
        if isinstance(v, str) and v == "cpu":
            return "npu"
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return type(v)(*(self.value(x) for x in v))
        if isinstance(v, (list, tuple)):
            return type(v)(self.value(x) for x in v)
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        return v

    def sample(self, op, sample):
        """input, args and kwargs on npu (tensors the op wants on the host stay there)."""
        host = HOST_ARGUMENTS.get(op.name, ())
        args = tuple(a if i in host and isinstance(a, torch.Tensor) else self.value(a)
                     for i, a in enumerate(sample.args))
        return self.value(sample.input), args, self.value(sample.kwargs)


def cpu_leaves(sample) -> list[torch.Tensor]:
    seen: dict[int, torch.Tensor] = {}

    def walk(v):
        if isinstance(v, torch.Tensor):
            if v.requires_grad and v.grad_fn is None:
                seen.setdefault(id(v), v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(sample.input)
    walk(sample.args)
    walk(sample.kwargs)
    return list(seen.values())


# ---------------------------------------------------------------------------
# Comparing results


def flat_tensors(v) -> list[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in flat_tensors(x)]
    if isinstance(v, Mapping):
        return [t for x in v.values() for t in flat_tensors(x)]
    return []


def to_host(v):
    """npu results as CPU values; checks that every tensor result is on npu."""
    if isinstance(v, torch.Tensor):
        if v.device.type != "npu":
            raise AssertionError(f"a result is on {v.device}, not on npu")
        return v.detach().cpu()
    if isinstance(v, tuple) and hasattr(v, "_fields"):
        return type(v)(*(to_host(x) for x in v))
    if isinstance(v, torch.Size):
        return v
    if isinstance(v, (list, tuple)):
        return type(v)(to_host(x) for x in v)
    if isinstance(v, Mapping):
        return {k: to_host(x) for k, x in v.items()}
    return v


def compare(actual, expected, *, values: bool, path: str = "result") -> None:
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise AssertionError(f"{path}: expected a tensor, got {type(actual).__name__}")
        expected = expected.detach()
        if not values:
            if actual.shape != expected.shape or actual.dtype != expected.dtype:
                raise AssertionError(
                    f"{path}: {actual.dtype}{list(actual.shape)} != {expected.dtype}{list(expected.shape)}")
            return
        torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{path}: {m}")
        return
    if isinstance(expected, (str, bytes)) or expected is None or isinstance(expected, torch.dtype):
        if actual != expected:
            raise AssertionError(f"{path}: {actual!r} != {expected!r}")
        return
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping) or set(actual) != set(expected):
            raise AssertionError(f"{path}: {actual!r} != {expected!r}")
        for k in expected:
            compare(actual[k], expected[k], values=values, path=f"{path}[{k!r}]")
        return
    if isinstance(expected, Sequence):
        if not isinstance(actual, Sequence) or len(actual) != len(expected):
            raise AssertionError(f"{path}: {actual!r} != {expected!r}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            compare(a, e, values=values, path=f"{path}[{i}]")
        return
    if isinstance(expected, (bool, int, float, complex)):
        if values:
            torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{path}: {m}")
        elif type(actual) is not type(expected):
            raise AssertionError(f"{path}: {type(actual).__name__} != {type(expected).__name__}")
        return
    if actual != expected:
        raise AssertionError(f"{path}: {actual!r} != {expected!r}")


def grad_outputs(outputs: list[torch.Tensor], seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, dtype=o.dtype, generator=g) for o in outputs]


def differentiable(outputs) -> list[int]:
    return [
        i for i, o in enumerate(flat_tensors(outputs))
        if o.requires_grad and (o.is_floating_point() or o.is_complex())
    ]


# ---------------------------------------------------------------------------
# Running one sample


def describe(sample, index: int) -> str:
    def short(v):
        if isinstance(v, torch.Tensor):
            return f"Tensor{list(v.shape)}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(short(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}={short(x)}" for k, x in v.items()) + "}"
        return repr(v)

    text = f"sample {index}: input={short(sample.input)} args={short(sample.args)} kwargs={short(sample.kwargs)}"
    return text if len(text) < 300 else text[:297] + "..."


# What a passing sample checked: its values (and gradients), only the
# structure, shapes and dtypes of a random op's results, or only that npu
# refuses it with the CPU's exception type.
VALUES, STRUCTURE, RAISED = "values", "structure", "raised"


def run_sample(op, sample, index: int, backward: bool) -> str:
    """What was compared (VALUES, STRUCTURE or RAISED); raises AssertionError
    (or the npu error) when npu and CPU disagree."""
    mirror = Mirror()
    npu_input, npu_args, npu_kwargs = mirror.sample(op, sample)
    values = not sample_is_random(op, sample)

    try:
        expected = op(sample.input, *sample.args, **sample.kwargs)
    except Exception as cpu_error:  # noqa: BLE001
        try:
            op(npu_input, *npu_args, **npu_kwargs)
            torch.npu.synchronize()
        except Exception as npu_error:  # noqa: BLE001
            if not isinstance(npu_error, type(cpu_error)):
                raise AssertionError(
                    f"the CPU raised {type(cpu_error).__name__}: {cpu_error}; "
                    f"npu raised {type(npu_error).__name__}: {npu_error}") from None
            return RAISED  # both reject the sample
        raise AssertionError(f"the CPU raised {type(cpu_error).__name__}: {cpu_error}, npu did not")
    checked = VALUES if values else STRUCTURE

    if flat_tensors([npu_input, npu_args, npu_kwargs]) or "device" in npu_kwargs:
        result = op(npu_input, *npu_args, **npu_kwargs)
    else:
        # A factory sample without tensors or device (arange(2)): on npu it
        # means npu as the default device.
        with torch.device("npu"):
            result = op(npu_input, *npu_args, **npu_kwargs)
    actual = to_host(result)
    torch.npu.synchronize()
    compare(actual, expected, values=values)

    if not backward:
        return checked
    expected_out = flat_tensors(sample.output_process_fn_grad(expected))
    actual_out = flat_tensors(sample.output_process_fn_grad(result))
    if len(actual_out) != len(expected_out):
        raise AssertionError("output_process_fn_grad gave different structures")
    picked = differentiable(expected_out)
    leaves = cpu_leaves(sample)
    if not picked or not leaves:
        return checked
    by_cpu = {id(c): n for c, n in mirror.leaves}
    npu_leaves = [by_cpu[id(t)] for t in leaves]
    weights = grad_outputs([expected_out[i] for i in picked], seed=index)
    try:
        expected_grads = torch.autograd.grad(
            [expected_out[i] for i in picked], leaves, weights, allow_unused=True)
    except Exception:  # noqa: BLE001
        try:
            torch.autograd.grad(
                [actual_out[i] for i in picked], npu_leaves, [w.npu() for w in weights], allow_unused=True)
            torch.npu.synchronize()
        except Exception:  # noqa: BLE001
            return checked
        raise AssertionError("the CPU backward raised, npu's did not")
    if not all(actual_out[i].requires_grad for i in picked):
        raise AssertionError("an npu result does not require grad where the CPU's does")
    actual_grads = torch.autograd.grad(
        [actual_out[i] for i in picked], npu_leaves, [w.npu() for w in weights], allow_unused=True)
    for k, (a, e) in enumerate(zip(actual_grads, expected_grads)):
        if (a is None) != (e is None):
            raise AssertionError(f"grad[{k}]: {'None' if a is None else 'a tensor'} on npu, "
                                 f"{'None' if e is None else 'a tensor'} on the CPU")
        if a is not None:
            compare(to_host(a), e, values=values, path=f"grad[{k}]")
    torch.npu.synchronize()
    return checked


def run_dtype(op, dtype: torch.dtype, checked: set[str]) -> str | None:
    """None if every sample passes, else the first failure's description and
    how many of the samples failed (all samples run: a failure does not hide
    the later ones). Adds to `checked` what the passing samples compared."""
    backward = (
        op.supports_autograd
        and (dtype.is_floating_point or dtype.is_complex)
        and dtype in op.supported_backward_dtypes("cpu")
    )
    first, failed, ran = None, 0, 0
    try:
        samples = op.sample_inputs("cpu", dtype, requires_grad=backward)
        for index, sample in enumerate(itertools.islice(samples, MAX_SAMPLES)):
            ran += 1
            try:
                checked.add(run_sample(op, sample, index, backward))
            except Exception as error:  # noqa: BLE001
                try:
                    torch.npu.synchronize()  # clear a pending device error
                except Exception:  # noqa: BLE001
                    pass
                failed += 1
                if first is None:
                    message = str(error).strip().splitlines()
                    head = " / ".join(line.strip() for line in message[:4] if line.strip())
                    first = f"{describe(sample, index)}: {type(error).__name__}: {head[:600]}"
    except Exception as error:  # noqa: BLE001  making samples failed
        return f"sample inputs: {type(error).__name__}: {error}"
    if first is None:
        return None
    return f"{first} ({failed} of {ran} samples fail)"


# ---------------------------------------------------------------------------
# Test ids


def collected_ops():
    ops = sorted(op_db, key=entry_name)
    shard = os.environ.get("TORCH_NPU_OPINFO_SHARD")
    if shard:
        index, count = (int(x) for x in shard.split("/"))
        assert 0 <= index < count, f"TORCH_NPU_OPINFO_SHARD={shard}: expected i/n with 0 <= i < n"
        ops = ops[index::count]
    params = []
    for op in ops:
        name = entry_name(op)
        dtypes = {dtype_name(d) for d in dtypes_to_test(op)}
        records = [r for r in KNOWN.get(name, []) if r["dtype"] == "*" or r["dtype"] in dtypes]
        marks = []
        if records:
            reasons = "; ".join(f"{r['dtype']}: {r['reason']}" for r in records)
            marks.append(pytest.mark.xfail(raises=KnownFailure, strict=True, reason=reasons))
        params.append(pytest.param(op, id=name, marks=marks))
    return params


@pytest.mark.parametrize("op", collected_ops())
def test_opinfo(op, record_property):
    name = entry_name(op)
    dtypes = [dtype_name(d) for d in dtypes_to_test(op)]
    failures = {}
    checked: set[str] = set()
    for dtype in dtypes_to_test(op):
        message = run_dtype(op, dtype, checked)
        if message is not None:
            failures[dtype_name(dtype)] = message
    # The summary counts an entry as matching the CPU only if some sample's
    # values were compared (conftest.py).
    record_property("opinfo_checked", sorted(checked))
    if not dtypes:
        # A CUDA-only OpInfo: there is no CPU result to compare with. It
        # fails (as a known failure) rather than passing vacuously.
        dtypes = ["*"]
        failures["*"] = "the OpInfo supports no dtype on the CPU: nothing to compare with"
    record_property("opinfo_dtypes", {d: d not in failures for d in dtypes if d != "*"})

    records = [r for r in KNOWN.get(name, []) if r["dtype"] == "*" or r["dtype"] in dtypes]
    listed = set(dtypes) if any(r["dtype"] == "*" for r in records) else {r["dtype"] for r in records}
    report = "\n".join(f"  {d}: {m}" for d, m in sorted(failures.items()))
    unexpected = set(failures) - listed
    if unexpected:
        raise AssertionError(
            f"{name} fails for {sorted(unexpected)} (not in {KNOWN_FAILURES_FILE.name}):\n{report}")
    fixed = listed - set(failures)
    if fixed:
        raise AssertionError(
            f"{name} now passes for {sorted(fixed)}: remove or narrow its entries in {KNOWN_FAILURES_FILE.name}"
            + (f"\nstill failing:\n{report}" if report else ""))
    if failures:
        raise KnownFailure(report)


def test_known_failures_file_names_real_entries():
    """Every record names an OpInfo entry and one of its CPU dtypes (or "*"),
    says why, and appears once: stale records cannot linger."""
    records = json.loads(KNOWN_FAILURES_FILE.read_text())["failures"]
    by_name = {entry_name(op): op for op in op_db}
    seen = set()
    problems = []
    for record in records:
        key = (record.get("op"), record.get("dtype"), bool(record.get("checker", False)))
        op = by_name.get(record.get("op"))
        if op is None:
            problems.append(f"{record}: no OpInfo entry of that name")
        elif record.get("dtype") != "*" and record.get("dtype") not in {
                dtype_name(d) for d in op.supported_dtypes("cpu")}:
            problems.append(f"{record}: not a CPU dtype of {record['op']}")
        if not record.get("reason"):
            problems.append(f"{record}: no reason")
        if key in seen:
            problems.append(f"{record}: duplicate")
        seen.add(key)
        unknown = set(record) - {"op", "dtype", "reason", "checker", "sample"}
        if unknown:
            problems.append(f"{record}: unknown fields {sorted(unknown)}")
    assert not problems, "\n".join(problems)
