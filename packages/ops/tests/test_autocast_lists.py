"""Every op of PyTorch's autocast lists, under torch.autocast("npu"), against
the same op on the CPU with the casts its list prescribes.

npu uses CUDA's lists (csrc/Autocast.cpp), taken here from PyTorch's own
test data (torch.testing._internal.autocast_test_lists.AutocastTestLists,
what test_cuda.py runs for CUDA). For each op the reference is computed on
the CPU without autocast, after casting the inputs as the op's list says:
lower precision (the autocast dtype), float32, or the widest input dtype.
npu runs the CPU's kernels, so results must be equal bit for bit. Where
PyTorch's CPU autocast puts the op in the same list, the npu result must
also equal CPU autocast's.
"""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401
from torch.testing._internal.autocast_test_lists import AutocastCPUTestLists, AutocastTestLists

LOW, FP32, PROMOTE, BUILTIN = "lower_precision", "fp32", "promote", "builtin_promote"

# CUDA-only kernels in CUDA's list; npu has no such ops (and no autocast
# entry for them, checked below).
CUDA_ONLY = {"cudnn_convolution", "cudnn_convolution_transpose"}


def _cases(device: str):
    lists = AutocastTestLists(torch.device(device))
    cases = []

    def add(policy, module, entries):
        for entry in entries:
            op, args = entry[0], entry[1]
            kwargs = entry[2] if len(entry) > 2 and isinstance(entry[2], dict) else {}
            if op in CUDA_ONLY:
                continue
            if op == "einsum":
                # The list's entry ("bkhd,bqhd->bqkh" over two matrices) does
                # not run anywhere (test_cuda.py skips it by accident): an
                # equation that fits its operands.
                args = ("ij,jk->ik", *entry[2])
            cases.append((policy, module, op, args, kwargs))

    add(LOW, "torch", lists.torch_fp16)
    add(LOW, "nn", lists.nn_fp16)
    add(LOW, "linalg", lists.linalg_fp16)
    add(LOW, "method", lists.methods_fp16)
    add(FP32, "torch", lists.torch_fp32)
    add(FP32, "nn", lists.nn_fp32)
    add(FP32, "method", lists.methods_fp32)
    add(PROMOTE, "torch", lists.torch_need_autocast_promote)
    for op, args, _ in lists.torch_expect_builtin_promote:
        cases.append((BUILTIN, "torch", op, args, {}))
    for op, args, _ in lists.methods_expect_builtin_promote:
        cases.append((BUILTIN, "method", op, args, {}))
    # npu's addition to CUDA's list (as in PyTorch's CPU and XPU lists).
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(8, 100, generator=g) * 3).to(device, torch.float16)
    target = torch.randint(0, 100, (8,), generator=g).to(device)
    cases.append((FP32, "nn_functional", "cross_entropy", (logits, target), {}))
    cases.append((FP32, "nn_functional", "cross_entropy", (logits, target), {"label_smoothing": 0.1}))
    return cases


def _function(module: str, op: str, args):
    if module == "method":
        return getattr(type(args[0]), op)
    namespace = {"torch": torch, "nn": torch._C._nn, "linalg": torch._C._linalg,
                 "nn_functional": torch.nn.functional}[module]
    return getattr(namespace, op)


def _map(value, fn):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map(v, fn) for v in value)
    return value


def _floats(value):
    found = []
    _map(value, lambda t: found.append(t.dtype) if t.is_floating_point() else None)
    return found


def _cast_as_listed(policy, args, dtype):
    """The inputs an autocast wrapper of `policy` hands the kernel."""
    if policy == LOW:
        return _map(args, lambda t: t.to(dtype) if t.is_floating_point() and t.dtype != torch.float64 else t)
    if policy == FP32:
        return _map(args, lambda t: t.float() if t.is_floating_point() and t.dtype != torch.float64 else t)
    if policy == PROMOTE:
        widest = torch.float32 if torch.float32 in _floats(args) else dtype
        return _map(args, lambda t: t.to(widest) if t.is_floating_point() and t.dtype != torch.float64 else t)
    return args  # built-in promotion: autocast does nothing


def _cpu_lists():
    lists = AutocastCPUTestLists(torch.device("cpu"))
    names = {LOW: set(), FP32: set(), PROMOTE: set()}
    for attr, policy in (("torch_16", LOW), ("nn_16", LOW), ("torch_fp32", FP32), ("nn_fp32", FP32),
                         ("torch_need_autocast_promote", PROMOTE)):
        names[policy] |= {entry[0] for entry in getattr(lists, attr)}
    names[FP32].add("cross_entropy")
    return names


CASES = _cases("cpu")  # the ids only; each test builds its npu arguments


def _ids():
    seen = {}
    ids = []
    for policy, _, op, _, _ in CASES:
        key = f"{policy}-{op}"
        seen[key] = seen.get(key, 0) + 1
        ids.append(key if seen[key] == 1 else f"{key}-{seen[key]}")
    return ids


@pytest.fixture(scope="module")
def npu_cases():
    torch.manual_seed(0)
    return _cases("npu")


# Ops that PyTorch routes differently on npu than on the CPU: every device
# but the CPU takes the fused-cell kernels (csrc/RnnCellKernels.cpp), which
# compute in float32 and round once, as CUDA's do, where the CPU rounds each
# step to the autocast dtype. Same casts and dtype; the values are compared
# with the cell computed in float32 from the same cast inputs, to within
# the dtype's rounding.
FUSED_ON_NPU = {"lstm_cell", "gru_cell"}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("index", range(len(CASES)), ids=_ids())
def test_op_follows_its_autocast_list(npu_cases, index, dtype):
    policy, module, op, npu_args, kwargs = npu_cases[index]
    # The lists' low-precision inputs are float16; under bfloat16 autocast
    # they stand for bfloat16 ones (mixing both is an error on any device).
    npu_args = _map(npu_args, lambda t: t.to(dtype) if t.dtype == torch.float16 else t)
    fn = _function(module, op, npu_args)
    with torch.autocast("npu", dtype=dtype):
        result = fn(*npu_args, **kwargs)
    cpu_args = _map(npu_args, lambda t: t.cpu())
    cast = _cast_as_listed(policy, cpu_args, dtype)
    if op in FUSED_ON_NPU:
        in_float32 = fn(*_map(cast, lambda t: t.float() if t.is_floating_point() else t), **kwargs)
        expected = _map(in_float32, lambda t: t.to(dtype))
        _assert_same(op, _map(result, lambda t: t.cpu()), expected, exact=False)
        return
    expected = fn(*cast, **kwargs)
    _assert_same(op, _map(result, lambda t: t.cpu()), expected)
    # Where CPU autocast lists the op the same way, it computes the same.
    if policy != BUILTIN and op in _cpu_lists()[policy] and dtype == torch.bfloat16 and op not in FUSED_ON_NPU:
        with torch.autocast("cpu", dtype=dtype):
            cpu_autocast = fn(*cpu_args, **kwargs)
        _assert_same(op, _map(result, lambda t: t.cpu()), cpu_autocast)


def _assert_same(op, got, want, exact=True):
    if not isinstance(want, torch.Tensor) and not isinstance(want, tuple):
        assert got == want, f"{op}: {got} != {want}"
        return
    for g, w in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want))):
        assert g.dtype == w.dtype, f"{op}: {g.dtype} where its list gives {w.dtype}"
        # Not exact: two roundings apart at most.
        eps = torch.finfo(w.dtype).eps if w.is_floating_point() else 0
        tolerance = {"rtol": 0, "atol": 0} if exact else {"rtol": 2 * eps, "atol": 2 * eps}
        torch.testing.assert_close(g, w, equal_nan=True, **tolerance)


def test_cross_entropy_keeps_float32_precision_with_low_precision_logits():
    # The case: a float32 loss with bf16 precision in value.
    g = torch.Generator().manual_seed(3)
    logits = (torch.randn(16, 1000, generator=g) * 4).bfloat16()
    target = torch.randint(0, 1000, (16,), generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cpu = torch.nn.functional.cross_entropy(logits, target)
    with torch.autocast("npu", dtype=torch.bfloat16):
        npu = torch.nn.functional.cross_entropy(logits.npu(), target.npu())
    assert npu.dtype == torch.float32
    assert npu.item() == cpu.item() == torch.nn.functional.cross_entropy(logits.float(), target).item()


def test_banned_ops_raise_as_on_cuda():
    a = torch.rand(4, 4, device="npu")
    with torch.autocast("npu"), pytest.raises(RuntimeError, match="unsafe to autocast"):
        torch._C._nn.binary_cross_entropy(a, a)


def _has_kernel(op: str, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(op, key)


def _cuda_only(op: str) -> bool:
    # cuDNN ops: no kernel a CPU (or npu) could run; CPU-only builds of torch
    # register them without any backend kernel.
    return not any(
        _has_kernel(op, key) for key in ("CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd")
    )


def test_cuda_only_entries_have_no_npu_autocast_kernel():
    for op in CUDA_ONLY:
        assert not _has_kernel(f"aten::{op}", "AutocastPrivateUse1")
        assert _cuda_only(f"aten::{op}")


def test_npu_autocast_kernels_are_cudas_plus_cross_entropy_and_the_fused_attention_path():
    # CUDA builds of torch also register autocast kernels for cuDNN-only ops
    # (_cudnn_rnn) outside the shared lists; every other CUDA autocast op,
    # including ones a torch release adds by hand, must autocast on npu too.
    # The fused attention path autocasts on npu only: torch 2.13 keeps CUDA's
    # autocast away from it (Note [The fused attention path under autocast]).
    names = torch._C._dispatch_get_all_op_names()
    npu = {n for n in names if _has_kernel(n, "AutocastPrivateUse1")}
    cuda = {n for n in names if _has_kernel(n, "AutocastCUDA")}
    assert npu - cuda == {"aten::cross_entropy_loss", "aten::_native_multi_head_attention"}
    assert {n for n in cuda - npu if not _cuda_only(n)} == set()
