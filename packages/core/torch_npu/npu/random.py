"""Random number generator state of npu devices, as torch.cuda.random.

Each device has a default generator (Philox-style: a seed and an offset);
its state is a 16-byte ByteTensor ``[seed: uint64][offset: int64]``.
Generators are created on demand without initializing the device, so seeding
applies immediately.
"""

from __future__ import annotations

from typing import Iterable, Union

import torch

from .. import _C
from ._device import _DeviceLike, _get_device_index, device_count


def _generator(device: _DeviceLike = None) -> torch.Generator:
    if isinstance(device, str) and device == "npu":
        device = None
    index = _get_device_index(device, optional=True)
    _C._check_device_index(index)
    return _C._default_generator(index)


def get_rng_state(device: _DeviceLike = "npu") -> torch.Tensor:
    """The state of ``device``'s default generator (current device for "npu")."""
    return _generator(device).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    """The states of every device's default generator."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = "npu") -> None:
    """Sets the state of ``device``'s default generator."""
    _generator(device).set_state(new_state.clone(memory_format=torch.contiguous_format))


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    """Sets the state of each device's default generator."""
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


def manual_seed(seed: Union[int, float]) -> None:
    """Seeds the current device's default generator."""
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: Union[int, float]) -> None:
    """Seeds every device's default generator."""
    for index in range(device_count()):
        _generator(index).manual_seed(int(seed))


def seed() -> None:
    """Seeds the current device's default generator with a random number."""
    _generator().seed()


def seed_all() -> None:
    """Seeds every device's default generator with one random number."""
    random_seed = _generator(0).seed() if device_count() > 0 else None
    if random_seed is not None:
        for index in range(1, device_count()):
            _generator(index).manual_seed(random_seed)


def initial_seed() -> int:
    """The current seed of the current device's default generator."""
    return _generator().initial_seed()
