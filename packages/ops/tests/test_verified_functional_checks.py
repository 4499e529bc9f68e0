"""The first call of a signature runs the op's functional CPU kernel, whose
checks some out= kernels lack (Note [Verified calls run the functional
kernel], csrc/CallVerification.h).

max() and min() of an empty tensor raise on the CPU; their out= overloads,
which the executor runs for functional ops, reduce to -inf / inf, and
torch.max of an empty npu tensor returned -inf once torch._dynamo (and
with it the Python meta kernels) was imported.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo  # noqa: F401  (the Python meta kernels become active)
import torch_npu  # noqa: F401

_FULL_REDUCTIONS = {"max": torch.max, "min": torch.min, "amax": torch.amax, "argmax": torch.argmax}


@pytest.mark.parametrize("name", sorted(_FULL_REDUCTIONS))
def test_full_reduction_of_an_empty_tensor_raises_as_on_the_cpu(name):
    op = _FULL_REDUCTIONS[name]
    with pytest.raises((RuntimeError, IndexError)) as on_cpu:
        op(torch.empty(0, 3))
    x = torch.empty(0, 3, device="npu")
    for _ in range(2):  # also once a non-empty call of the op ran cleanly
        with pytest.raises(type(on_cpu.value), match="Expected reduction dim to be specified"):
            op(x)
        torch.npu.synchronize()
        ones = torch.ones(2, 3)
        assert torch.equal(op(ones.npu()).cpu(), op(ones))


def test_clean_signatures_still_write_through_the_out_overload():
    x = torch.randn(4, 5)
    for _ in range(3):
        assert torch.equal(torch.max(x.npu()).cpu(), torch.max(x))
        assert torch.equal(torch.min(x.npu()).cpu(), torch.min(x))
