"""torch.compile on npu against eager npu for a sample of PyTorch's OpInfo
database: each sampled op's first two float32 sample inputs, compiled
whole, must give eager's results (kernels MLIR cannot build may run their
aten ops eagerly: results still count). A silent wrong result in compiled
code (Note [Bool buffers of a kernel in bytes] was one) shows up here as a
mismatch.

Sampling: the ops with float32 CPU support, minus random, data-dependent
and linear-algebra families (_compile_opinfo.eligible_ops), sorted by
name; SAMPLE_SIZE of them drawn with random.Random(SEED). Each draw costs about one second of
MLIR compilation; ops whose compilation is known to fail are strict xfails
naming why. test_compile_opinfo_full.py is the wide run: every eligible
op, several dtypes, forward and gradients.
"""

from __future__ import annotations

import random
import warnings

import pytest
import torch
import torch._dynamo

from _compile_opinfo import eligible_ops, op_name
from torch_npu.graph.compile import _mlir

SEED = 0
SAMPLE_SIZE = 40
# op name -> why its compilation fails (a strict xfail). adaptive_max_pool3d
# was one until its indices, which Inductor computes without reading the
# input, ran as an extern kernel (Note [Lowerings that are not aten
# programs run as extern kernels]).
KNOWN_FAILURES: dict[str, str] = {}


def _sampled_ops() -> list:
    return random.Random(SEED).sample(eligible_ops(torch.float32), SAMPLE_SIZE)


def _params() -> list:
    params = []
    for op in _sampled_ops():
        name = op_name(op)
        marks = [pytest.mark.xfail(reason=KNOWN_FAILURES[name], strict=True)] if name in KNOWN_FAILURES else []
        params.append(pytest.param(op, id=name, marks=marks))
    return params


@pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")
@pytest.mark.parametrize("op", _params())
def test_compiled_op_matches_eager(op):
    checked = 0
    for sample in list(op.sample_inputs("npu", torch.float32, requires_grad=False))[:2]:
        def fn(*args, **kwargs):
            return op(*args, **kwargs)

        try:
            expected = fn(sample.input, *sample.args, **sample.kwargs)
        except Exception:  # a sample eager npu refuses: not this test's subject
            continue
        torch._dynamo.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = torch.compile(fn, dynamic=False)(sample.input, *sample.args, **sample.kwargs)
        torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4, equal_nan=True)
        checked += 1
    torch._dynamo.reset()
    assert checked > 0, "no sample of this op runs eagerly on npu"
