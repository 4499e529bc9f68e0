"""An empty dim list reduces every dim of nansum and nanmean, as on the CPU
(Note [An empty dim list reduces every dim], csrc/EmptyDimLists.h).

nansum's CPU kernel reads dim=[] as "every dimension"; its Python meta
kernel, which the executor shapes outputs with, read it as "none" and the
npu result had the input's shape.
"""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401

_REDUCTIONS = {
    "nansum": lambda t, **kw: torch.nansum(t, dim=[], **kw),
    "nanmean": lambda t, **kw: torch.nanmean(t, dim=[], **kw),
    "sum": lambda t, **kw: torch.sum(t, dim=[], **kw),
}


@pytest.mark.parametrize("name", sorted(_REDUCTIONS))
@pytest.mark.parametrize("keepdim", [False, True])
def test_empty_dim_list_reduces_every_dim_as_on_the_cpu(name, keepdim):
    x = torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]])
    expected = _REDUCTIONS[name](x, keepdim=keepdim)
    result = _REDUCTIONS[name](x.npu(), keepdim=keepdim)
    assert result.shape == expected.shape == ((1, 1) if keepdim else ())
    torch.testing.assert_close(result.cpu(), expected, equal_nan=True)


def test_a_listed_dim_still_reduces_only_that_dim():
    x = torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]])
    result = torch.nansum(x.npu(), dim=[1])
    assert result.shape == (2,)
    torch.testing.assert_close(result.cpu(), torch.nansum(x, dim=[1]))
