"""Devices: count, selection, properties and synchronization."""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass
from typing import Any, Optional, Union

import torch

from .. import _C

_DeviceLike = Union[torch.device, str, int, None]


def _get_device_index(device: _DeviceLike, optional: bool = False) -> int:
    """The npu device index of ``device``; the current device for None
    (when ``optional``) or for "npu" without an index."""
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "npu":
            raise ValueError(f"Expected an npu device, got {device}")
        index = device.index
    elif isinstance(device, int):
        index = device
    elif device is None:
        if not optional:
            raise ValueError("Expected an npu device, got None")
        index = None
    else:
        raise TypeError(f"Expected an npu device (torch.device, str or int), got {device!r}")
    if index is None:
        return _C._get_device()
    return index


def is_available() -> bool:
    """Whether any npu device is usable. Starts no threads, initializes nothing."""
    return _C._get_device_count() > 0


def device_count() -> int:
    """Number of visible npu devices (see ASCEND_RT_VISIBLE_DEVICES)."""
    return _C._get_device_count()


def current_device() -> int:
    """Index of the calling thread's current npu device."""
    return _C._get_device()


def set_device(device: _DeviceLike) -> None:
    """Sets the calling thread's current npu device. A negative index is a no-op."""
    index = _get_device_index(device)
    if index >= 0:
        _C._set_device(index)


class device:
    """Context manager that makes ``device`` the current npu device.

    A negative index or None leaves the current device unchanged.
    """

    def __init__(self, device: _DeviceLike) -> None:
        self.idx = _get_device_index(device, optional=True) if device is not None else -1
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = _C._exchange_device(self.idx)

    def __exit__(self, *exc: Any) -> bool:
        _C._exchange_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of tensor ``obj`` current (no-op
    for tensors not on npu)."""

    def __init__(self, obj: torch.Tensor) -> None:
        super().__init__(obj.get_device() if obj.device.type == "npu" else -1)


def synchronize(device: _DeviceLike = None) -> None:
    """Waits until all work of all streams of ``device`` (current device if
    None) has finished, and reports errors of that work."""
    _C._synchronize(_get_device_index(device, optional=True))


@dataclass(frozen=True)
class _NPUDeviceProperties:
    name: str
    total_memory: int
    cube_core_num: int
    vector_core_num: int
    L2_cache_size: int

    def __repr__(self) -> str:
        return (
            f"_NPUDeviceProperties(name='{self.name}', "
            f"total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"cube_core_num={self.cube_core_num}, vector_core_num={self.vector_core_num}, "
            f"L2_cache_size={self.L2_cache_size // (1024 * 1024)}MB)"
        )


def get_device_properties(device: _DeviceLike = None) -> _NPUDeviceProperties:
    """Properties of an npu device: name, total_memory, core counts, L2 size."""
    props = _C._get_device_properties(_get_device_index(device, optional=True))
    return _NPUDeviceProperties(**props)


def get_device_name(device: _DeviceLike = None) -> str:
    """Name of an npu device (the SoC name; the simulator says it is simulated)."""
    return get_device_properties(device).name


def get_device_capability(device: _DeviceLike = None) -> Optional[tuple[int, int]]:
    """``None``: CANN has no compute-capability versions, and Ascend's torch_npu
    returns None too. As there, ``TORCH_NPU_DEVICE_CAPABILITY="major.minor"``
    makes it return ``(major, minor)``, for code that insists on a tuple;
    the value means nothing about the device. A malformed value raises
    ValueError."""
    _C._check_device_index(_get_device_index(device, optional=True))
    configured = os.environ.get("TORCH_NPU_DEVICE_CAPABILITY", "")
    if not configured:
        return None
    match = re.fullmatch(r"(\d+)\.(\d+)", configured.strip())
    if match is None:
        raise ValueError(
            f"TORCH_NPU_DEVICE_CAPABILITY={configured!r} is not of the form 'major.minor' "
            "(non-negative integers, e.g. '8.0'); unset it to get None"
        )
    return int(match.group(1)), int(match.group(2))


def can_device_access_peer(device: _DeviceLike, peer_device: _DeviceLike) -> bool:
    """Whether npu ``device`` can access the memory of ``peer_device`` directly
    (``False`` for a device and itself, as on CANN and CUDA)."""
    from . import _lazy_init

    _lazy_init()
    return bool(_C._can_device_access_peer(_get_device_index(device), _get_device_index(peer_device)))


def utilization(device: _DeviceLike = None) -> int:
    """Percent of the time since the previous call (or since the device
    started) during which device work ran on ``device``, like
    ``torch.cuda.utilization``. On the simulator it measures the time its
    worker threads spent running device work."""
    from . import _lazy_init

    _lazy_init()
    index = _get_device_index(device, optional=True)
    _C._check_device_index(index)
    return int(_C._utilization(index))


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Ascend 910B-class devices compute in bfloat16 natively."""
    return is_available()


def current_blas_handle() -> None:
    """None, with a warning: npu has no BLAS handle (torch_npu answers the
    same; torch.cuda's returns cuBLAS's)."""
    warnings.warn("NPU does not use blas handle.")
    return None
