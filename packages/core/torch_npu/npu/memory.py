"""Memory of npu devices: the caching allocator's statistics and controls,
with the names and keys of torch.cuda's memory API."""

from __future__ import annotations

import collections
from typing import Any

from .. import _C
from ._device import _DeviceLike, _get_device_index


def _index(device: _DeviceLike) -> int:
    index = _get_device_index(device, optional=True)
    _C._check_device_index(index)
    return index


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else key, inner, out)
    else:
        out[prefix] = value


def memory_stats(device: _DeviceLike = None) -> dict[str, Any]:
    """The caching allocator's statistics for ``device``, keyed like
    torch.cuda.memory_stats (e.g. ``"allocated_bytes.all.current"``)."""
    flat: dict[str, Any] = {}
    _flatten("", _C._memory_stats(_index(device)), flat)
    return collections.OrderedDict(sorted(flat.items()))


def memory_allocated(device: _DeviceLike = None) -> int:
    """Bytes of device memory occupied by tensors."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: _DeviceLike = None) -> int:
    """Peak of memory_allocated since start or reset_peak_memory_stats."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: _DeviceLike = None) -> int:
    """Bytes of device memory held by the caching allocator (used and cached)."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: _DeviceLike = None) -> int:
    """Peak of memory_reserved since start or reset_peak_memory_stats."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    """Resets the "peak" statistics to the current values."""
    _C._reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device: _DeviceLike = None) -> None:
    """Deprecated alias of reset_peak_memory_stats, kept for compatibility."""
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: _DeviceLike = None) -> None:
    """Resets the "allocated"/"freed" counters and event counts."""
    _C._reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    """Returns the allocator's unused cached memory to the device."""
    _C._empty_cache()


def mem_get_info(device: _DeviceLike = None) -> tuple[int, int]:
    """(free, total) bytes of device memory, as the runtime reports them."""
    free, total = _C._mem_get_info(_index(device))
    return int(free), int(total)


def set_per_process_memory_fraction(fraction: float, device: _DeviceLike = None) -> None:
    """Limits this process's reserved memory on ``device`` to ``fraction`` of
    its capacity; allocations beyond raise torch.OutOfMemoryError."""
    if not isinstance(fraction, (int, float)):
        raise TypeError(f"Invalid type for fraction argument: {type(fraction).__name__}, must be float")
    _C._set_memory_fraction(float(fraction), _index(device))


def get_per_process_memory_fraction(device: _DeviceLike = None) -> float:
    """The fraction set by set_per_process_memory_fraction (1.0 by default)."""
    return float(_C._get_memory_fraction(_index(device)))


def host_memory_stats() -> dict[str, Any]:
    """Statistics of the pinned host memory allocator, keyed like
    torch.cuda.host_memory_stats (e.g. ``"allocated_bytes.current"``)."""
    flat: dict[str, Any] = {}
    _flatten("", _C._host_memory_stats(), flat)
    return collections.OrderedDict(sorted(flat.items()))


def _set_allocator_settings(settings: str) -> None:
    """Changes the caching allocator's settings at run time.

    ``settings`` has the form of ``PYTORCH_NPU_ALLOC_CONF``: comma-separated
    ``key:value`` entries (``expandable_segments``, ``max_split_size_mb``,
    ``garbage_collection_threshold``, ``roundup_power2_divisions``,
    ``base_addr_aligned_kb``, ``page_size``), parsed over the current
    settings, so keys it does not name keep their values. The allocators of
    every device take the new settings for their next requests; memory
    already cached stays where it is. An unknown key or a bad value raises
    RuntimeError naming the key and what it accepts, and changes nothing.
    ``expandable_segments:True`` is accepted but not used yet (it warns
    once).

    Example: ``torch.npu.memory._set_allocator_settings("expandable_segments:True")``.
    """
    if not isinstance(settings, str):
        raise TypeError(f"_set_allocator_settings takes a str, got {type(settings).__name__}")
    _C._npu_set_allocator_settings(settings)


def _get_allocator_settings() -> dict[str, Any]:
    """The caching allocator's current settings as plain values: sizes in
    bytes (``None`` when unlimited or unset) and
    ``roundup_power2_divisions`` as a list indexed by the bit length of a
    request's size minus one (0: plain 512-byte rounding)."""
    return dict(_C._npu_allocator_settings())
