"""An in-place op keeps its tensor's shape: one whose other operand
broadcasts to a larger shape is refused at the call, as the CPU refuses it
(Note [In-place ops keep their tensor's shape]).

Once torch._dynamo is imported (torch.compile, and PyTorch's own TestCase,
import it), PyTorch registers torch._refs' in-place wrappers as the meta
kernels of fmod_, remainder_, copysign_, hypot_, xlogy_ ...; those resize the
meta tensor to the broadcast shape. The executor took that shape for the npu
tensor: x.fmod_(y) with x of [1] and y of [2, 1, 2, 1] turned x into a
[2, 1, 2, 1] tensor of garbage instead of raising.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch._dynamo  # noqa: F401  registers the Python meta kernels that resize
import torch_npu  # noqa: F401

OPS = ["fmod_", "remainder_", "copysign_", "hypot_", "xlogy_", "atan2_", "add_"]


@pytest.mark.parametrize("op", OPS)
def test_an_in_place_op_refuses_a_broadcast_to_another_shape(op):
    small = torch.tensor([5.0])
    large = torch.full((2, 1, 2, 1), 3.0)
    with pytest.raises(RuntimeError, match=r"doesn't match the broadcast shape") as cpu_error:
        getattr(small, op)(large)
    small_npu = small.npu()
    for _ in range(2):  # the second call of a signature is not waited for
        with pytest.raises(RuntimeError) as npu_error:
            getattr(small_npu, op)(large.npu())
        # Where the meta kernel does not resize (torch 2.14's), the CPU kernel
        # raises it at the call, and the message also names the Python line
        # (Note [Errors at the call]).
        npu_message = re.sub(r" \(launched from [^)]*\)$", "", str(npu_error.value).splitlines()[0])
        assert npu_message == str(cpu_error.value).splitlines()[0]
    torch.npu.synchronize()
    assert small_npu.shape == small.shape
    torch.testing.assert_close(small_npu.cpu(), small, atol=0, rtol=0)


@pytest.mark.parametrize("op", OPS)
def test_an_in_place_op_still_broadcasts_its_other_operand(op):
    large = torch.full((2, 1, 2, 1), 5.0)
    small = torch.tensor([3.0])
    expected = getattr(large.clone(), op)(small)
    result = getattr(large.npu(), op)(small.npu())
    assert result.shape == expected.shape
    torch.testing.assert_close(result.cpu(), expected)


def test_in_place_ops_that_change_the_shape_still_do():
    x = torch.arange(6.0).npu()
    x.unsqueeze_(0)
    assert x.shape == (1, 6)
    x.t_()
    assert x.shape == (6, 1)
    x.resize_(2, 3)
    torch.testing.assert_close(x.cpu(), torch.arange(6.0).reshape(2, 3))
