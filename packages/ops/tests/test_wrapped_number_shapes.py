"""A Python number and a 0-dim tensor of its dtype give different result
dtypes, and the executor's cache of meta results tells them apart.

The executor caches an op's output specs per argument geometry
(OutputShapes.cpp). A Python float reaches a binary op as a wrapped 0-dim
float64 tensor, which type promotion ignores for an integer tensor
(x * 1.0 is float32); a real 0-dim float64 tensor promotes it (float64).
Keyed alike, the second call reused the first one's float32 output.
"""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401


@pytest.mark.parametrize("op", [torch.xlogy, torch.mul, torch.fmod], ids=lambda op: op.__name__)
def test_a_0_dim_float64_tensor_after_a_python_float_promotes_to_float64(op):
    x = torch.tensor([1, 2, 3], dtype=torch.int64)
    scalar = torch.tensor(1.0 / 3, dtype=torch.float64)  # 0-dim, on the CPU
    assert op(x.npu(), 2.5).dtype == op(x, 2.5).dtype == torch.float32
    result = op(x.npu(), scalar)
    expected = op(x, scalar)
    assert result.dtype == expected.dtype == torch.float64
    torch.testing.assert_close(result.cpu(), expected, atol=0, rtol=0)


FIRST_OPS_SCRIPT = """
import torch, torch_npu
for op in (torch.fmod, torch.remainder, torch.copysign, torch.xlogy):
    for dtype in (torch.int32, torch.int16, torch.uint8, torch.bool, torch.int64):
        x = torch.tensor([1, 2, 3, 4]).to(dtype)
        result, expected = op(x.npu(), -2.5), op(x, -2.5)
        assert result.dtype == expected.dtype == torch.float32, (op, dtype, result.dtype)
        torch.testing.assert_close(result.cpu(), expected, atol=0, rtol=0, equal_nan=True)
print("ok")
"""


def test_a_python_float_keeps_the_default_dtype_in_the_first_ops_of_a_process(python_subprocess_env):
    # While the meta kernels warm up (the first ops of a process), an op runs
    # its CPU kernel on a copy of each host argument, and the copy dropped the
    # wrapped-number flag: the CPU kernel promoted the float as a 0-dim
    # float64 tensor, so fmod, remainder, copysign, xlogy of an integer tensor
    # and a Python float returned float64 where the CPU returns float32.
    result = python_subprocess_env(FIRST_OPS_SCRIPT, {"TORCH_NPU_META_WARMUP": "1"})
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_a_shift_by_a_python_float_names_the_cpu_dtype():
    x = torch.tensor([1, 2], dtype=torch.int32)
    with pytest.raises(NotImplementedError) as on_cpu:
        x << 1.5
    with pytest.raises(NotImplementedError) as on_npu:
        x.npu() << 1.5
    assert str(on_npu.value).split(" (launched")[0] == str(on_cpu.value).split(" (launched")[0]
