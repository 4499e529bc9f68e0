"""The npu generator: seeds, offsets, the 16-byte state, reproducibility."""

from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401


def seed_and_offset(state: torch.Tensor) -> tuple[int, int]:
    assert state.dtype == torch.uint8 and state.numel() == 16
    return state[:8].view(torch.uint64).item(), state[8:].view(torch.int64).item()


def test_generator_on_npu():
    g = torch.Generator(device="npu")
    assert g.device == torch.device("npu:0")
    g.manual_seed(1234)
    assert g.initial_seed() == 1234
    assert seed_and_offset(g.get_state()) == (1234, 0)
    g2 = torch.Generator(device="npu:3")
    assert g2.device == torch.device("npu:3")


def test_state_layout_round_trip_as_dtensor_uses_it():
    torch.npu.manual_seed(42)
    state = torch.npu.get_rng_state()
    assert seed_and_offset(state) == (42, 0)
    new_state = state.clone()
    new_state[8:] = torch.tensor([4096], dtype=torch.int64).view(torch.uint8)
    torch.npu.set_rng_state(new_state)
    assert seed_and_offset(torch.npu.get_rng_state()) == (42, 4096)
    g = torch.npu.default_generators[0]
    assert g.get_offset() == 4096


def test_manual_seed_all_and_state_all():
    torch.npu.manual_seed_all(7)
    states = torch.npu.get_rng_state_all()
    assert len(states) == torch.npu.device_count()
    assert all(seed_and_offset(s) == (7, 0) for s in states)
    torch.manual_seed(99)  # torch seeds the custom backend too
    assert torch.npu.initial_seed() == 99
    torch.npu.set_rng_state_all(states)
    assert torch.npu.initial_seed() == 7


def test_seed_is_random_and_reproducible_by_state():
    torch.npu.seed()
    first = torch.npu.initial_seed()
    saved = torch.npu.get_rng_state()
    torch.npu.seed()
    assert torch.npu.initial_seed() != first
    torch.npu.set_rng_state(saved)
    assert torch.npu.initial_seed() == first


def test_bad_state_is_rejected():
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.npu.set_rng_state(torch.zeros(8, dtype=torch.uint8))
    with pytest.raises(TypeError):
        torch.npu.set_rng_state(torch.zeros(16))
