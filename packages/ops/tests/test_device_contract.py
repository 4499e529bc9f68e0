"""PyTorch's device contract for npu, checked with PyTorch's own test data and
device-type test machinery.

What a backend must do beyond computing the CPU's values (those are
test_opinfo_conformance.py's). The tests are PyTorch's OpInfo and ModuleInfo
databases (``op_db``, ``module_db``) instantiated by
``instantiate_device_type_tests``:

* ``TestDeviceContract`` runs on the CPU and on npu, so that the summary can
  say how many OpInfos pass each check on each device (conftest.py prints
  it). Checks, per OpInfo:
  - ``test_errors``: every ``error_inputs`` sample raises the OpInfo's error
    type with a message matching its pattern, at the call;
  - ``test_dtypes``: the op runs for exactly the dtypes the OpInfo claims for
    the CPU (npu runs the CPU's kernels), and refuses the others at the call
    (DTYPE_CANDIDATES; the first sample of each dtype);
  - ``test_out``: out= semantics: the right out is used in place (same
    object, same memory, strides kept when it has the right shape, also
    non-contiguous ones), a wrong-shaped one is resized with a warning at
    every call, an empty one without a warning, an out on another device or
    of a dtype the result cannot be cast to raises at the call;
  - ``test_noncontiguous_samples``: non-contiguous samples give what the
    contiguous ones give.
* ``TestNpuMatchesCpu`` runs on npu and compares with the CPU: results' and
  gradients' values, strides and dtypes on contiguous and non-contiguous
  samples; the first sample on a second device; every ModuleInfo's forward
  and backward, ``.to()`` round trips (Parameter objects kept) and pickling.

Samples: the first sample of float32 (or the OpInfo's first CPU dtype) for
out=, the first three for the sample checks, every error input, the first
sample of each candidate dtype; every OpInfo and ModuleInfo entry. Known
differences are listed in ``contract_known_failures.json`` beside this file
with reasons, and xfailed strictly (``unittest.expectedFailure``: a listed
case that passes fails the run): each is a case where the CPU fails the same
check, an OpInfo that is CUDA-only, npu doing what the CPU does where the
OpInfo expects CUDA's behaviour from every other device ("cpu_behaviour":
true), npu doing what CUDA does beyond the CPU where code written for
accelerators relies on it ("cuda_behaviour": true: histc of integers), or an
open npu bug ("npu_bug": true)
(test_known_failures_are_justified checks). conftest.py prints the counts.
"""

from __future__ import annotations

import copy
import io
import json
import pathlib
import unittest
import warnings

import _random_ops
import torch
import torch_npu  # noqa: F401
from torch.testing._internal.common_device_type import (
    OpDTypes,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_modules import module_db, modules
from torch.testing._internal.common_utils import TestCase
from torch.testing._internal.opinfo.core import DecorateInfo
from torch.utils._pytree import tree_leaves

KNOWN_FILE = pathlib.Path(__file__).with_name("contract_known_failures.json")
SAMPLES = 3
DTYPE_CANDIDATES = (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
    torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool,
)


def entry_name(info) -> str:
    if hasattr(info, "module_cls"):
        return info.name
    return info.name + (f".{info.variant_test_name}" if info.variant_test_name else "")


def _device_type(device: str) -> str:
    return torch.device(device).type


def _cpu_scaled_mm_refuses_int64_out() -> bool:
    """Whether this machine's CPU torch._scaled_mm refuses an int64 out= for
    its OpInfo's first sample (test_out's sixth case). ATen picks the kernel
    by the CPU: its oneDNN path (CPUs with AMX, for one) checks the out dtype,
    its reference path accepts any."""
    op = next(o for o in op_db if entry_name(o) == "torch._scaled_mm")
    sample = next(iter(op.sample_inputs("cpu", _first_dtype(op, "cpu"))))
    expected = op(sample.input, *sample.args, **sample.kwargs)
    try:
        op(sample.input, *sample.args, out=torch.empty_like(expected, dtype=torch.long), **sample.kwargs)
    except (RuntimeError, TypeError):
        return True
    return False


# Note [Known failures that depend on the machine]: a record with "unless"
# names one of these; where it holds, the case passes here and the record is
# not applied (an expected failure that passes would fail the run). Each is
# computed the way the test checks, so the listing stays strict both ways.
MACHINE_CONDITIONS = {"cpu_scaled_mm_refuses_int64_out": _cpu_scaled_mm_refuses_int64_out}


def _known_failures() -> list[dict]:
    return json.loads(KNOWN_FILE.read_text())["failures"]


def _applicable_known_failures() -> list[dict]:
    """The records that apply on this machine (Note [Known failures that
    depend on the machine])."""
    holds: dict[str, bool] = {}
    out = []
    for record in _known_failures():
        condition = record.get("unless")
        if condition is not None:
            if condition not in holds:
                holds[condition] = MACHINE_CONDITIONS[condition]()
            if holds[condition]:
                continue
        out.append(record)
    return out


def _with_known_failures(infos, test_class: str):
    """Copies of `infos` with unittest.expectedFailure on the listed cases."""
    by_name: dict[str, list[dict]] = {}
    for record in _applicable_known_failures():
        if record["class"] == test_class:
            by_name.setdefault(record["entry"], []).append(record)
    out = []
    for info in infos:
        records = by_name.get(entry_name(info))
        if records:
            info = copy.copy(info)
            extra = tuple(
                DecorateInfo(unittest.expectedFailure, test_class, r["test"], device_type=r["device"])
                for r in records
            )
            if hasattr(info, "module_cls"):
                info.decorators = (*info.decorators, *extra)
            else:
                info.decorators = (*info.decorators, *extra)
        out.append(info)
    return out


def _first_dtype(op, device_type: str):
    supported = op.supported_dtypes(device_type)
    if torch.float32 in supported:
        return torch.float32
    return sorted(supported, key=str)[0] if supported else None


def _synchronize(device: str) -> None:
    if _device_type(device) == "npu":
        torch.npu.synchronize()


def _tensors(value) -> list[torch.Tensor]:
    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def _samples(op, device, dtype, count=SAMPLES, **kwargs):
    # Samples are made on the CPU (the same values on both devices) and
    # moved; a "cpu" device argument names the test's device. A tensor that
    # the OpInfo's generator itself leaves on the CPU for the device (the
    # indices of tensor_split, CPU scalars) stays there: the structure of
    # the samples it makes for another device (meta, which is cheap) says
    # which.
    def move(v, placed):
        if isinstance(v, torch.Tensor):
            if isinstance(placed, torch.Tensor) and placed.device.type == "cpu":
                return v.detach().clone().requires_grad_(v.requires_grad)
            if v._base is not None and v.layout == torch.strided:
                # A view stays a view of its whole base (as_strided's
                # partial_views samples address the base's memory).
                base = v._base.detach().to(device)
                return base.as_strided(v.size(), v.stride(), v.storage_offset()).requires_grad_(v.requires_grad)
            return v.detach().to(device).requires_grad_(v.requires_grad)
        if isinstance(v, torch.device) and v.type == "cpu":
            return torch.device(device)
        if isinstance(v, str) and v == "cpu":
            return str(torch.device(device))

        def like(p, n):
            return p if isinstance(p, (list, tuple)) and len(p) == n else [None] * n

        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return type(v)(*(move(x, p) for x, p in zip(v, like(placed, len(v)))))
        if isinstance(v, (list, tuple)):
            return type(v)(move(x, p) for x, p in zip(v, like(placed, len(v))))
        if isinstance(v, dict):
            return {k: move(x, placed.get(k) if isinstance(placed, dict) else None) for k, x in v.items()}
        return v

    placements = iter(())
    if torch.device(device).type != "cpu":
        try:
            placements = iter(op.sample_inputs("meta", dtype, **kwargs))
        except Exception:  # noqa: BLE001 - then every tensor moves
            placements = iter(())

    def next_placement():
        nonlocal placements
        try:
            return next(placements, None)
        except Exception:  # noqa: BLE001 - a generator that needs data: every tensor moves
            placements = iter(())
            return None

    out = []
    for sample in op.sample_inputs("cpu", dtype, **kwargs):
        placed = next_placement()
        p_in, p_args, p_kw = (placed.input, placed.args, placed.kwargs) if placed is not None else (None, None, None)
        out.append((sample, move(sample.input, p_in), move(sample.args, p_args), move(sample.kwargs, p_kw)))
        if len(out) == count:
            break
    return out


# ---------------------------------------------------------------------------
# Checks on both devices


ERROR_OPS = _with_known_failures([op for op in op_db if op.error_inputs_func is not None], "TestDeviceContract")
ALL_OPS = _with_known_failures(op_db, "TestDeviceContract")
OUT_OPS = _with_known_failures([op for op in op_db if op.supports_out], "TestDeviceContract")


class TestDeviceContract(TestCase):
    exact_dtype = True

    @ops(ERROR_OPS, dtypes=OpDTypes.none)
    def test_errors(self, device, op):
        for error in op.error_inputs(device):
            sample = error.sample_input
            # At the call: no synchronization inside the assertion.
            try:
                with self.assertRaisesRegex(error.error_type, error.error_regex):
                    op(sample.input, *sample.args, **sample.kwargs)
            except AssertionError as failure:
                try:
                    _synchronize(device)
                except Exception as late:  # noqa: BLE001 - the error came, but too late
                    raise AssertionError(f"raised only at a later synchronization: {late}") from failure
                raise
            _synchronize(device)

    @ops(ALL_OPS, dtypes=OpDTypes.none)
    def test_dtypes(self, device, op):
        claimed = op.supported_dtypes("cpu")
        works, refuses_late = set(), set()
        for dtype in DTYPE_CANDIDATES:
            try:
                samples = _samples(op, device, dtype, count=1)
            except Exception:  # noqa: BLE001 - no sample for this dtype
                samples = []
            if not samples:
                # An OpInfo makes samples for the dtypes it claims only.
                if dtype in claimed:
                    works.add(dtype)
                continue
            _, input, args, kwargs = samples[0]
            try:
                op(input, *args, **kwargs)
            except Exception:  # noqa: BLE001 - refused at the call
                continue
            try:
                _synchronize(device)
            except Exception:  # noqa: BLE001 - refused, but too late
                refuses_late.add(dtype)
                continue
            works.add(dtype)
        candidates = set(DTYPE_CANDIDATES)
        self.assertEqual(refuses_late, set(), msg="dtypes refused only at a later synchronization")
        self.assertEqual(works & candidates, claimed & candidates)

    @ops(OUT_OPS, dtypes=OpDTypes.none)
    def test_out(self, device, op):
        dtype = _first_dtype(op, "cpu")
        if dtype is None:
            self.fail("the OpInfo supports no dtype on the CPU")
        samples = _samples(op, device, dtype, count=1)
        if not samples:
            self.fail("the OpInfo makes no sample")
        _, input, args, kwargs = samples[0]
        expected = op(input, *args, **kwargs)
        _synchronize(device)
        results = _tensors(expected)
        if not results or (not isinstance(expected, torch.Tensor) and not isinstance(expected, tuple)):
            return  # nothing an out= could hold

        def call(out):
            return op(input, *args, out=out, **kwargs)

        def like(make):
            made = [make(t) for t in results]
            return made[0] if isinstance(expected, torch.Tensor) else tuple(made)

        def check_values(out):
            _synchronize(device)
            for got, want in zip(_tensors(out), results):
                self.assertEqual(got, want, exact_device=True, exact_dtype=True)

        # 1. The right shape, dtype and device: used in place.
        out = like(torch.empty_like)
        pointers = [t.data_ptr() for t in _tensors(out)]
        returned = call(out)
        self.assertTrue(all(r is o for r, o in zip(_tensors(returned), _tensors(out))), "out= returned another tensor")
        self.assertEqual([t.data_ptr() for t in _tensors(out)], pointers, msg="out= was reallocated")
        check_values(out)

        # 2. Non-contiguous, right shape: strides and memory kept.
        def transposed(t):
            if t.dim() < 2:
                return torch.empty(t.numel() * 2, dtype=t.dtype, device=t.device)[::2].view(t.shape) \
                    if t.dim() == 1 else torch.empty_like(t)
            return torch.empty_like(t).transpose(0, 1).contiguous().transpose(0, 1)

        out = like(transposed)
        strides = [t.stride() for t in _tensors(out)]
        pointers = [t.data_ptr() for t in _tensors(out)]
        call(out)
        self.assertEqual([t.stride() for t in _tensors(out)], strides, msg="a correctly shaped out= was restrided")
        self.assertEqual([t.data_ptr() for t in _tensors(out)], pointers, msg="out= was reallocated")
        check_values(out)

        # 3. Wrong shape, non-empty: resized, with a warning at every call.
        # 4. Empty: resized silently.
        for shape, warns in (((7,), True), ((0,), False)):
            for _ in range(2):
                out = like(lambda t: torch.empty(shape, dtype=t.dtype, device=t.device))
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    call(out)
                    _synchronize(device)
                resized = [str(w.message) for w in caught if "resized" in str(w.message)]
                if warns:
                    self.assertTrue(resized, msg=f"resizing a non-empty out= of shape {shape} did not warn")
                else:
                    self.assertEqual(resized, [])
                check_values(out)

        # 5. Another device: refused at the call. (Zero-dimensional CPU
        # inputs go with an out= on any device, as on CUDA: CPU scalars.)
        other = "cpu" if _device_type(device) != "cpu" else "npu:0"
        inputs = _tensors((input, args, kwargs))
        if other == "cpu" or any(t.dim() > 0 for t in inputs):
            out = like(lambda t: torch.empty_like(t, device=other))
            with self.assertRaises(RuntimeError, msg=f"an out= on {other} was accepted"):
                call(out)
            _synchronize(device)

        # 6. A dtype the result cannot be cast to: refused at the call.
        floating = [t for t in results if t.is_floating_point() or t.is_complex()]
        if floating and len(floating) == len(results):
            out = like(lambda t: torch.empty_like(t, dtype=torch.long))
            with self.assertRaises((RuntimeError, TypeError), msg="an int64 out= for a floating result was accepted"):
                call(out)
            _synchronize(device)

    @ops(ALL_OPS, dtypes=OpDTypes.none)
    def test_noncontiguous_samples(self, device, op):
        dtype = _first_dtype(op, "cpu")
        if dtype is None:
            self.fail("the OpInfo supports no dtype on the CPU")
        if op.name in RANDOM_OPS:
            return
        contiguous = _samples(op, device, dtype, count=SAMPLES)
        noncontiguous = _samples(op, device, dtype, count=SAMPLES, noncontiguous=True)
        for (_, a_in, a_args, a_kw), (_, b_in, b_args, b_kw) in zip(contiguous, noncontiguous):
            try:
                expected = op(a_in, *a_args, **a_kw)
            except Exception:  # noqa: BLE001 - then the other must fail too
                with self.assertRaises(Exception):
                    op(b_in, *b_args, **b_kw)
                    _synchronize(device)
                continue
            actual = op(b_in, *b_args, **b_kw)
            _synchronize(device)
            self.assertEqual(actual, expected, exact_dtype=True, exact_device=True)


# Ops whose values are random (they cannot be compared between runs); this
# suite also leaves torch._scaled_mm's values uncompared.
RANDOM_OPS = _random_ops.RANDOM_OPS | {"torch._scaled_mm"}

instantiate_device_type_tests(TestDeviceContract, globals(), only_for=("cpu", "privateuse1"))


# ---------------------------------------------------------------------------
# npu against the CPU


NPU_OPS = _with_known_failures(op_db, "TestNpuMatchesCpu")
NPU_MODULES = _with_known_failures(module_db, "TestNpuMatchesCpu")


def _random(op, sample) -> bool:
    if op.name in RANDOM_OPS:
        return True
    if op.name == "nn.functional.multi_head_attention_forward":  # args[9] is dropout_p
        return sample.kwargs.get("training", True) and len(sample.args) > 9 and sample.args[9] > 0
    dropout = sample.kwargs.get("dropout_p") or 0.0
    return op.name == "nn.functional.scaled_dot_product_attention" and dropout > 0


def _materialize(module, args, kwargs):
    # A lazy module makes its parameters at the first forward, from the
    # generator of their device: made once on the CPU, both sides start from
    # the same weights (as a checkpoint would give them).
    if any(isinstance(m, torch.nn.modules.lazy.LazyModuleMixin) for m in module.modules()):
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            module(*args, **kwargs)


class TestNpuMatchesCpu(TestCase):
    exact_dtype = True

    def _compare_results(self, actual, expected, device, values=True):
        got, want = _tensors(actual), _tensors(expected)
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertEqual(g.device, torch.device(device))
            self.assertEqual(g.dtype, w.dtype)
            self.assertEqual(g.shape, w.shape)
            if g.layout == torch.strided and w.layout == torch.strided and g.numel() > 1:
                self.assertEqual(g.stride(), w.stride(), msg="the result's strides differ from the CPU's")
            if values:
                self.assertEqual(g.cpu(), w, exact_device=False, exact_dtype=True)

    @ops(NPU_OPS, dtypes=OpDTypes.none)
    def test_results_match_cpu(self, device, op):
        dtype = _first_dtype(op, "cpu")
        if dtype is None:
            self.fail("the OpInfo supports no dtype on the CPU")
        for noncontiguous in (False, True):
            cpu = _samples(op, "cpu", dtype, noncontiguous=noncontiguous)
            npu = _samples(op, device, dtype, noncontiguous=noncontiguous)
            for (sample, c_in, c_args, c_kw), (_, n_in, n_args, n_kw) in zip(cpu, npu):
                try:
                    expected = op(c_in, *c_args, **c_kw)
                except Exception as error:  # noqa: BLE001
                    with self.assertRaises(type(error)):
                        op(n_in, *n_args, **n_kw)
                    torch.npu.synchronize()
                    continue
                actual = op(n_in, *n_args, **n_kw)
                torch.npu.synchronize()
                self._compare_results(actual, expected, device, values=not _random(op, sample))

    @ops(NPU_OPS, allowed_dtypes=(torch.float32, torch.int64))
    def test_multiple_devices(self, device, dtype, op):
        second = torch.device("npu", 1)
        samples = _samples(op, second, dtype, count=1)
        if not samples:
            return
        _, input, args, kwargs = samples[0]
        try:
            result = op(input, *args, **kwargs)
        except Exception as error:  # noqa: BLE001 - it must fail on the CPU too
            _, c_in, c_args, c_kw = _samples(op, "cpu", dtype, count=1)[0]
            with self.assertRaises(type(error)):
                op(c_in, *c_args, **c_kw)
            torch.npu.synchronize(second)
            return
        torch.npu.synchronize(second)
        for t in _tensors(result):
            self.assertEqual(t.device, second)

    @modules(NPU_MODULES, allowed_dtypes=(torch.float32,))
    def test_module_matches_cpu(self, device, dtype, module_info, training):
        inputs = module_info.module_inputs_func(module_info, device="cpu", dtype=dtype, requires_grad=True,
                                                training=training)
        for module_input in inputs[:2]:
            if module_input.forward_input is None:
                continue
            args, kwargs = module_input.constructor_input.args, module_input.constructor_input.kwargs
            torch.manual_seed(0)
            cpu_module = module_info.module_cls(*args, **kwargs).to(dtype).train(training)
            f_args = module_input.forward_input.args
            f_kwargs = module_input.forward_input.kwargs
            _materialize(cpu_module, f_args, f_kwargs)
            npu_module = copy.deepcopy(cpu_module)
            parameters = [id(p) for p in npu_module.parameters()]
            npu_module.to(device)
            # .to() keeps the Parameter objects, as on CUDA
            self.assertEqual([id(p) for p in npu_module.parameters()], parameters)

            def moved(v):
                if isinstance(v, torch.Tensor):
                    return v.detach().to(device).requires_grad_(v.requires_grad)
                if isinstance(v, (list, tuple)):
                    return type(v)(moved(x) for x in v)
                if isinstance(v, dict):
                    return {k: moved(x) for k, x in v.items()}
                return v

            n_args, n_kwargs = moved(f_args), moved(f_kwargs)
            with torch.random.fork_rng():
                expected = cpu_module(*f_args, **f_kwargs)
            actual = npu_module(*n_args, **n_kwargs)
            torch.npu.synchronize()
            random = module_info.name in RANDOM_MODULES and training
            self._compare_results(actual, expected, device, values=not random)
            # backward: the same weights of the outputs on both sides
            outs_c = [t for t in _tensors(expected) if t.requires_grad]
            outs_n = [t for t in _tensors(actual) if t.requires_grad]
            if not outs_c or random:
                continue
            g = torch.Generator().manual_seed(1)
            weights = [torch.randn(t.shape, dtype=t.dtype, generator=g) for t in outs_c]
            leaves_c = [p for p in cpu_module.parameters() if p.requires_grad]
            leaves_c += [t for t in _tensors(f_args) + _tensors(f_kwargs) if t.requires_grad]
            leaves_n = [p for p in npu_module.parameters() if p.requires_grad]
            leaves_n += [t for t in _tensors(n_args) + _tensors(n_kwargs) if t.requires_grad]
            grads_c = torch.autograd.grad(outs_c, leaves_c, weights, allow_unused=True)
            grads_n = torch.autograd.grad(outs_n, leaves_n, [w.to(device) for w in weights], allow_unused=True)
            torch.npu.synchronize()
            for gn, gc in zip(grads_n, grads_c):
                self.assertEqual(gn is None, gc is None)
                if gc is not None:
                    self.assertEqual(gn.cpu(), gc, exact_device=False)

    @modules(NPU_MODULES, allowed_dtypes=(torch.float32,))
    def test_module_round_trips(self, device, dtype, module_info, training):
        inputs = module_info.module_inputs_func(module_info, device="cpu", dtype=dtype, requires_grad=False,
                                                training=training)
        for module_input in inputs[:1]:
            args, kwargs = module_input.constructor_input.args, module_input.constructor_input.kwargs
            module = module_info.module_cls(*args, **kwargs).to(dtype)
            if module_input.forward_input is not None:
                _materialize(module, module_input.forward_input.args, module_input.forward_input.kwargs)
            state = {k: v.clone() for k, v in module.state_dict().items()}
            ids = [id(p) for p in module.parameters()]
            module.to(device)
            self.assertTrue(all(t.device.type == "npu" for t in module.state_dict().values()))
            buffer = io.BytesIO()
            torch.save(module, buffer)
            buffer.seek(0)
            loaded = torch.load(buffer, weights_only=False)
            self.assertEqual(list(loaded.state_dict()), list(state))
            for name, value in loaded.state_dict().items():
                self.assertEqual(value.device, torch.device(device))
                self.assertEqual(value.cpu(), state[name])
            module.to("cpu")
            self.assertEqual([id(p) for p in module.parameters()], ids)
            for name, value in module.state_dict().items():
                self.assertEqual(value, state[name])


RANDOM_MODULES = {"nn.Dropout", "nn.Dropout1d", "nn.Dropout2d", "nn.Dropout3d", "nn.AlphaDropout",
                  "nn.FeatureAlphaDropout", "nn.RReLU", "nn.FractionalMaxPool2d", "nn.FractionalMaxPool3d",
                  "nn.TransformerEncoderLayer", "nn.TransformerDecoderLayer", "nn.TransformerEncoder",
                  "nn.Transformer", "nn.MultiheadAttention"}

instantiate_device_type_tests(TestNpuMatchesCpu, globals(), only_for=("privateuse1",))


def test_known_failures_are_justified():
    """Each record has a reason; an npu record is the CPU failing the same
    check (a cpu record of the same test and entry), a CUDA-only entry, npu
    behaving as the CPU where the OpInfo expects CUDA's behaviour from the
    other devices ("cpu_behaviour": true), npu behaving as CUDA beyond the
    CPU where accelerator code relies on it ("cuda_behaviour": true), or an
    open npu bug, said so ("npu_bug": true) and counted in the summary."""
    records = _known_failures()
    entries = {entry_name(i) for i in op_db} | {entry_name(m) for m in module_db}
    cpu = {(r["test"], r["entry"]) for r in records if r["device"] == "cpu"}
    problems = []
    for r in records:
        if not r.get("reason"):
            problems.append(f"{r}: no reason")
        if r["entry"] not in entries:
            problems.append(f"{r}: no such OpInfo / ModuleInfo")
        if r.get("unless", next(iter(MACHINE_CONDITIONS))) not in MACHINE_CONDITIONS:
            problems.append(f"{r}: 'unless' names no condition of MACHINE_CONDITIONS")
        justified = (r["test"], r["entry"]) in cpu or any(
            r.get(flag, False) for flag in ("cuda_only", "cpu_behaviour", "cuda_behaviour", "npu_bug"))
        if r["device"] == "npu" and not justified:
            problems.append(f"{r}: fails on npu only: fix it, or record it as an open npu_bug")
    assert not problems, "\n".join(problems)
