"""Note [Errors at the call] (csrc/CallVerification.h): argument errors that
only the CPU kernel checks are raised at the call, also after calls of the
same kind ran cleanly."""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401


def test_multinomial_refuses_more_samples_than_categories_at_the_call_after_a_clean_call():
    probabilities = torch.tensor([0.3, 0.7]).npu()
    torch.multinomial(probabilities, 2)  # a clean call: its kind is verified
    torch.npu.synchronize()
    with pytest.raises(RuntimeError, match=r"cannot sample n_sample > prob_dist.size\(-1\) samples without replacement"):
        torch.multinomial(probabilities, 3)
    torch.npu.synchronize()  # nothing left to raise
    assert torch.multinomial(probabilities, 3, replacement=True).shape == (3,)
