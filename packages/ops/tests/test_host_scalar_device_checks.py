"""0-dim CPU tensors are taken only where CUDA takes them.

CUDA checks that every positional and out= tensor of an op is on one device,
0-dim CPU tensors included, unless the op is marked `device_check: NoCheck`
in native_functions.yaml (TensorIterator ops, where, masked_fill, ...). npu
took a 0-dim CPU tensor everywhere, so `torch.addmm(torch.tensor(2.), a, b)`
or `torch.clamp(a, torch.tensor(0.))` ran on npu where CUDA refuses them
(Note [Host scalars only where CUDA takes them]). The ops that do take them
must still give the CPU's values.
"""

from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401

SAME_DEVICE = "Expected all tensors to be on the same device"


def _inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "m": torch.randn(3, 3, generator=g),
        "v": torch.randn(3, generator=g),
        "b": torch.randn(2, 3, 3, generator=g),
    }


REFUSED = {
    "addmm": lambda s, t: torch.addmm(s, t["m"], t["m"]),
    "addmm_out": lambda s, t: torch.addmm(s, t["m"], t["m"], out=torch.empty_like(t["m"])),
    "addmv": lambda s, t: torch.addmv(s, t["m"], t["v"]),
    "addr": lambda s, t: torch.addr(s, t["v"], t["v"]),
    "baddbmm": lambda s, t: torch.baddbmm(s, t["b"], t["b"]),
    "addbmm": lambda s, t: torch.addbmm(s, t["b"], t["b"]),
    "clamp_min_tensor": lambda s, t: torch.clamp(t["m"], s),
    "clamp_max_tensor": lambda s, t: torch.clamp(t["m"], max=s),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_cpu_scalar_refused_where_cuda_checks_devices(name: str) -> None:
    cpu = _inputs()
    scalar = torch.tensor(0.5)
    REFUSED[name](scalar, cpu)  # the CPU takes it
    npu = {k: v.to("npu") for k, v in cpu.items()}
    with pytest.raises(RuntimeError, match=SAME_DEVICE):
        REFUSED[name](scalar, npu)
    torch.npu.synchronize()


TAKEN = {
    "mul": lambda s, t: t["m"] * s,
    "add_": lambda s, t: t["m"].clone().add_(s),
    "where": lambda s, t: torch.where(t["m"] > 0, t["m"], s),
    "masked_fill": lambda s, t: t["m"].masked_fill(t["m"] > 0, s),
    "clamp_tensor_out": lambda s, t: torch.clamp(t["m"], s, out=torch.empty_like(t["m"])),
    "lerp": lambda s, t: torch.lerp(t["m"], t["m"] * 2, s),
}


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_cpu_scalar_taken_where_cuda_takes_it(name: str) -> None:
    cpu = _inputs()
    scalar = torch.tensor(0.5)
    expected = TAKEN[name](scalar, cpu)
    actual = TAKEN[name](scalar, {k: v.to("npu") for k, v in cpu.items()})
    assert actual.device.type == "npu"
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)
