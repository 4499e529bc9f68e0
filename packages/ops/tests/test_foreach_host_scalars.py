"""The multi-tensor addcmul/addcdiv take their scalars from a host tensor, as on CUDA.

`torch._foreach_addcmul(tensors, t1, t2, scalars)` and `_foreach_addcdiv` have
an overload whose per-tensor scalars come as a 1-d tensor; CUDA requires that
tensor on the CPU. npu refused it as a host tensor of the wrong device, so code
written for an accelerator (the pattern PyTorch's own foreach tests use) failed
on npu. Results must match the CPU's, out of place and in place.
"""

from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401


def _lists(generator: torch.Generator) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    shapes = [(3, 4), (5,), (2, 2, 2)]
    make = lambda: [torch.randn(s, generator=generator) for s in shapes]  # noqa: E731
    return make(), make(), [t.abs() + 0.5 for t in make()]  # divisors kept away from zero


@pytest.mark.parametrize("name", ["_foreach_addcmul", "_foreach_addcdiv"])
def test_host_scalars_tensor_matches_cpu(name: str) -> None:
    generator = torch.Generator().manual_seed(0)
    tensors, first, second = _lists(generator)
    scalars = torch.tensor([0.5, -2.0, 3.0])

    expected = getattr(torch, name)(tensors, first, second, scalars)
    to_npu = lambda ts: [t.to("npu") for t in ts]  # noqa: E731
    actual = getattr(torch, name)(to_npu(tensors), to_npu(first), to_npu(second), scalars)
    assert [t.device.type for t in actual] == ["npu"] * 3
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.cpu(), e, rtol=0, atol=0)

    in_place = to_npu(tensors)
    getattr(torch, name + "_")(in_place, to_npu(first), to_npu(second), scalars)
    for a, e in zip(in_place, expected):
        torch.testing.assert_close(a.cpu(), e, rtol=0, atol=0)


def test_written_arguments_on_the_host_are_still_refused() -> None:
    # Only the read-only scalars may stay on the host: a host tensor among the
    # written tensors is refused at the call, as before.
    npu_tensors = [torch.ones(2, device="npu")]
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch._foreach_addcmul_([torch.ones(2)], npu_tensors, npu_tensors, torch.tensor([1.0]))
