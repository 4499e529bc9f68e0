"""_foreach_pow of bool tensors by a bool exponent gives bool, as on the CPU
(Note [Powers of bools by a bool stay bool], csrc/BoolPowers.h).

torch's Python meta kernel of pow promotes bool to int64; the executor
shapes _foreach_pow's outputs with it, and the npu results were int64.
"""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401

_BOOLS = torch.tensor([True, False, True])
_INTS = torch.tensor([2, 0, -3])


@pytest.mark.parametrize("exponent", [True, False, [True, False]], ids=["true", "false", "list"])
def test_bool_tensors_by_a_bool_exponent_stay_bool(exponent):
    tensors = [_BOOLS, _INTS]
    expected = torch._foreach_pow(tensors, exponent)
    result = torch._foreach_pow([t.npu() for t in tensors], exponent)
    assert [r.dtype for r in result] == [e.dtype for e in expected] == [torch.bool, torch.int64]
    for r, e in zip(result, expected):
        assert torch.equal(r.cpu(), e)


def test_bool_tensors_by_an_int_exponent_still_promote():
    expected = torch._foreach_pow([_BOOLS], 2)
    result = torch._foreach_pow([_BOOLS.npu()], 2)
    assert result[0].dtype == expected[0].dtype == torch.int64
    assert torch.equal(result[0].cpu(), expected[0])
