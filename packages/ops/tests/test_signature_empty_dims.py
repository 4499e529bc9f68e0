"""A call signature records which dimensions of an empty tensor are empty,
not only that it is empty (Note [Errors at the call], csrc/KernelArguments.h).

The CPU kernels of the adaptive average pools take an empty batch but refuse
an empty channel or spatial dimension ("Expected input to have non-zero size
for non-batch dimensions"). Once the Python meta kernels were active
(torch._dynamo imported, as PyTorch's test suites do) the npu op was queued;
after a clean call with an empty batch, a call with an empty channel
dimension had the same signature, was not verified, and its error surfaced
at a later synchronization. PyTorch's test_pooling probes
(test_AdaptiveMaxPool_zero_batch_dim and the other zero-batch tests) found it.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo  # noqa: F401  (activates the Python meta kernels)
import torch.nn.functional as F

import torch_npu  # noqa: F401

_MESSAGE = "non-zero size for non-batch dimensions"


@pytest.mark.parametrize(
    ("pool", "batch_empty", "channel_empty"),
    [
        (F.adaptive_avg_pool3d, (0, 4, 5, 5, 5), (1, 0, 5, 5, 5)),
        (F.adaptive_avg_pool3d, (0, 4, 5, 5, 5), (1, 4, 0, 5, 5)),
        (F.adaptive_avg_pool2d, (0, 4, 6, 6), (1, 4, 6, 0)),
    ],
)
def test_an_empty_non_batch_dimension_raises_at_the_call_after_an_empty_batch(pool, batch_empty, channel_empty):
    # The clean call with an empty batch comes first: its signature is verified.
    out = pool(torch.ones(batch_empty, device="npu"), 3)
    assert out.shape == pool(torch.ones(batch_empty), 3).shape
    with pytest.raises(RuntimeError, match=_MESSAGE):
        pool(torch.ones(channel_empty), 3)
    with pytest.raises(RuntimeError, match=_MESSAGE):
        pool(torch.ones(channel_empty, device="npu"), 3)
    torch.npu.synchronize()  # nothing left to fail later


def test_calls_after_an_empty_one_still_compute_what_the_cpu_computes():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 6, 5)
    pool = F.adaptive_avg_pool3d
    for shape in ((0, 3, 7, 6, 5), (2, 3, 7, 6, 5), (0, 3, 7, 6, 5)):
        t = x if shape[0] else x[:0]
        torch.testing.assert_close(pool(t.npu(), (2, 3, 4)).cpu(), pool(t, (2, 3, 4)))
