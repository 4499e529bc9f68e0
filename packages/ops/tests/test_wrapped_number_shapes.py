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
