"""Memory of npu devices: the caching allocator's statistics and controls,
with the names and keys of torch.cuda's memory API."""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import pickle
import sys
import time
import warnings
from typing import Any, Iterator, Literal

import torch

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


def memory_stats_as_nested_dict(device: _DeviceLike = None) -> dict[str, Any]:
    """:func:`memory_stats` before flattening: ``{"allocated_bytes": {"all":
    {"current": ...}}}``, as torch.cuda.memory_stats_as_nested_dict."""
    return _C._memory_stats(_index(device))


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


def memory_cached(device: _DeviceLike = None) -> int:
    """Deprecated name of :func:`memory_reserved` (as in torch.cuda)."""
    return memory_reserved(device)


def max_memory_cached(device: _DeviceLike = None) -> int:
    """Deprecated name of :func:`max_memory_reserved` (as in torch.cuda)."""
    return max_memory_reserved(device)


def reset_max_memory_cached(device: _DeviceLike = None) -> None:
    """Deprecated: calls :func:`reset_peak_memory_stats`, which resets every
    peak statistic, and says so with a FutureWarning (as torch.cuda does)."""
    warnings.warn("torch.npu.reset_max_memory_cached now calls torch.npu.reset_peak_memory_stats, "
                  "which resets /all/ peak memory stats.", FutureWarning, stacklevel=2)
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


def host_memory_stats_as_nested_dict() -> dict[str, Any]:
    """:func:`host_memory_stats` before flattening."""
    return _C._host_memory_stats()


def host_empty_cache() -> None:
    """Returns the pinned host memory that the host allocator caches and no
    tensor uses to the system (as torch_npu's torch.npu.host_empty_cache)."""
    _C._host_empty_cache()


def reset_peak_host_memory_stats() -> None:
    """Resets the "peak" statistics of :func:`host_memory_stats` to the
    current values."""
    _C._host_reset_peak_memory_stats()


def reset_accumulated_host_memory_stats() -> None:
    """Resets the accumulated counters of :func:`host_memory_stats` (counts
    and times of allocations and frees)."""
    _C._host_reset_accumulated_memory_stats()


# ---- memory history and snapshots (torch.cuda's format) -------------------

def _record_memory_history(
    enabled: Literal[None, "state", "all"] = "all",
    context: Literal[None, "state", "alloc", "all"] = "all",
    stacks: Literal["python", "all"] = "all",
    max_entries: int = sys.maxsize,
) -> None:
    """Starts (or, with ``enabled=None``, stops) recording the caching
    allocator's history, as ``torch.cuda.memory._record_memory_history``.

    ``enabled="all"`` keeps the last ``max_entries`` allocator events per
    device (allocations, frees, segments, OOMs) for :func:`_snapshot`'s
    ``device_traces``; ``"state"`` keeps only the stacks of live blocks.
    ``context`` says which stacks are kept (``"state"``: live blocks only,
    ``"alloc"``: also allocation events, ``"all"``: also frees);
    ``stacks="all"`` adds C++ frames to the Python ones.
    """
    if enabled not in (None, "state", "all"):
        raise ValueError(f"_record_memory_history: enabled must be None, 'state' or 'all', got {enabled!r}")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"_record_memory_history: context must be None, 'state', 'alloc' or 'all', got {context!r}")
    if not isinstance(max_entries, int) or max_entries < 1:
        raise ValueError(f"_record_memory_history: max_entries must be a positive int, got {max_entries!r}")
    if enabled == "state":
        max_entries = 1  # no trace: live state only
    _C._npu_record_memory_history(enabled is not None, context or "never", stacks, min(max_entries, 2**62))


def _snapshot(device: _DeviceLike = None) -> dict[str, Any]:
    """The caching allocator's state in torch.cuda's snapshot format: a dict
    with ``"segments"`` (every segment of every device, with its blocks and
    the stacks that allocated them) and ``"device_traces"`` (the recorded
    history per device). PyTorch's ``torch.cuda._memory_viz`` and
    pytorch.org/memory_viz read it; so does ``python -m
    torch_npu.profiler.memory_viz``. ``device`` is accepted for torch.cuda's
    signature; every device is included."""
    return _C._npu_memory_snapshot()


def memory_snapshot() -> list[dict[str, Any]]:
    """The segments of every device's caching allocator, with their blocks
    (``_snapshot()["segments"]``), as torch.cuda.memory_snapshot."""
    return _snapshot()["segments"]


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickles :func:`_snapshot` to ``filename``."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def _oom_snapshot_path(directory: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join(directory, f"oom_snapshot_{os.getpid()}_{stamp}.pickle")


def _install_oom_snapshot() -> None:
    """``OOM_SNAPSHOT_ENABLE=1`` (history of every allocation) or ``2``
    (live state only): when an allocation runs out of memory, a snapshot is
    written to ``OOM_SNAPSHOT_PATH`` (a directory, default the current one)
    before torch.OutOfMemoryError is raised, named
    ``oom_snapshot_<pid>_<time>.pickle``."""
    mode = os.environ.get("OOM_SNAPSHOT_ENABLE", "0").strip()
    if mode in ("", "0"):
        return
    if mode not in ("1", "2"):
        raise ValueError(
            f"OOM_SNAPSHOT_ENABLE={mode!r}: use 1 (record every allocation's history), "
            "2 (live state only) or 0 (off)")
    directory = os.environ.get("OOM_SNAPSHOT_PATH", "") or os.getcwd()
    _record_memory_history("all" if mode == "1" else "state")

    def on_out_of_memory(device: int, requested: int, free: int, total: int) -> None:
        os.makedirs(directory, exist_ok=True)
        path = _oom_snapshot_path(directory)
        _dump_snapshot(path)
        warnings.warn(f"npu:{device} ran out of memory (requested {requested} bytes, {free} of {total} free); "
                      f"memory snapshot written to {path}", stacklevel=2)

    _C._npu_attach_out_of_memory_observer(on_out_of_memory)


def memory_summary(device: _DeviceLike = None, abbreviated: bool = False) -> str:
    """A human-readable table of :func:`memory_stats` for ``device``, with
    the rows of torch.cuda.memory_summary (``abbreviated`` leaves out the
    per-pool rows)."""
    index = _index(device)
    stats = memory_stats(index)

    def size(n: int) -> str:
        for unit in ("B  ", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or unit == "GiB":
                return f"{n:6.0f} {unit}" if unit == "B  " else f"{n:6.1f} {unit}"
            n /= 1024
        return str(n)

    rows = [("Allocated memory", "allocated_bytes", size), ("Active memory", "active_bytes", size),
            ("Requested memory", "requested_bytes", size), ("Reserved memory", "reserved_bytes", size),
            ("Non-releasable memory", "inactive_split_bytes", size),
            ("Allocations", "allocation", str), ("Active allocs", "active", str),
            ("Reserved segments", "segment", str), ("Non-releasable allocs", "inactive_split", str)]
    line = "=" * 79
    out = [line, f" PyTorch NPU memory summary, device ID {index:<4d}".ljust(79), "-" * 79,
           f" {'Metric':<26}| {'Cur Usage':>11} | {'Peak Usage':>11} | {'Tot Alloc':>11} | {'Tot Freed':>10}",
           line]
    pools = ["all"] if abbreviated else ["all", "large_pool", "small_pool"]
    for title, key, fmt in rows:
        for pool in pools:
            name = title if pool == "all" else f"      from {pool.split('_')[0]} pool"
            values = [stats.get(f"{key}.{pool}.{field}", 0) for field in ("current", "peak", "allocated", "freed")]
            out.append(f" {name:<26}| " + " | ".join(f"{fmt(v):>11}" for v in values))
        out.append("-" * 79)
    out.append(f" Allocation retries: {stats.get('num_alloc_retries', 0)}    "
               f"OOMs: {stats.get('num_ooms', 0)}")
    out.append(line)
    return "\n".join(out) + "\n"


# ---- memory pools -----------------------------------------------------------

class MemPool:
    """A private pool of the caching allocator (Note [Private pools],
    csrc/npu/NPUCachingAllocator.h), as ``torch.cuda.MemPool``: tensors
    allocated inside :func:`use_mem_pool` come from it and its memory serves
    nothing else; it goes back to the device once the pool is deleted and
    its tensors are freed."""

    _next_id = itertools.count(1)

    def __init__(self, device: _DeviceLike = None) -> None:
        self._device = _index(device)
        # User pools take (n, 0), graphs' (0, n), as CUDA's.
        self._id = (next(MemPool._next_id), 0)
        _C._npu_createOrIncrefPool(self._device, self._id)
        self._held = True

    @property
    def id(self) -> tuple[int, int]:
        """The pool's MempoolId."""
        return self._id

    @property
    def device(self) -> int:
        return self._device

    def snapshot(self) -> list[dict[str, Any]]:
        """The segments of this pool, in :func:`_snapshot`'s format."""
        return [s for s in _snapshot()["segments"] if tuple(s["segment_pool_id"]) == self._id]

    def __del__(self) -> None:
        if getattr(self, "_held", False):
            self._held = False
            try:
                _C._npu_releasePool(self._device, self._id)
            except Exception:  # noqa: BLE001 - at interpreter exit the runtime may be gone
                pass


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device: _DeviceLike = None) -> Iterator[None]:
    """Allocations of the current thread's current stream on ``pool``'s
    device come from ``pool`` inside the block, as torch.cuda.use_mem_pool."""
    index = pool.device if device is None else _index(device)
    if index != pool.device:
        raise ValueError(f"use_mem_pool: the pool belongs to npu:{pool.device}, not npu:{index}")
    _C._npu_beginAllocateCurrentStreamToPool(index, pool.id)  # a use of the pool, for the block
    try:
        yield
    finally:
        _C._npu_endAllocateToPool(index, pool.id)
        _C._npu_releasePool(index, pool.id)


def caching_allocator_alloc(size: int, device: _DeviceLike = None, stream: Any = None) -> int:
    """Device memory of ``size`` bytes from the caching allocator (on
    ``stream``, default the current one), as torch.cuda's; free it with
    :func:`caching_allocator_delete`."""
    if not isinstance(size, int) or size < 0:
        raise ValueError(f"caching_allocator_alloc: size must be a non-negative int, got {size!r}")
    index = _index(device) if stream is None else stream.device_index
    if stream is None:
        from .streams import current_stream
        stream = current_stream(index)
    return int(_C._npu_caching_allocator_alloc(size, index, stream.stream_id))


def caching_allocator_delete(mem_ptr: int) -> None:
    """Frees memory from :func:`caching_allocator_alloc`."""
    _C._npu_caching_allocator_delete(int(mem_ptr))


def erase_stream(tensor: torch.Tensor, stream: torch.Stream) -> None:
    """Removes the use of ``tensor``'s memory on ``stream`` that
    ``tensor.record_stream(stream)`` added (torch_npu.erase_stream): once
    freed, the memory is reused at once instead of after the work queued on
    ``stream``. Nothing happens if ``stream`` was not recorded.

    Only safe when the work that uses the memory afterwards is ordered after
    ``stream``'s work, e.g. the allocating stream waited for an event
    recorded on ``stream`` (what ``Work.wait()`` of a collective does);
    otherwise that work may overwrite memory ``stream`` still reads.

    Raises TypeError for a non-tensor or non-stream, RuntimeError when the
    stream is not on the tensor's npu device or the memory was not allocated
    by the caching allocator.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"erase_stream: tensor must be a torch.Tensor, got {type(tensor).__name__}")
    if not isinstance(stream, torch.Stream):
        raise TypeError(f"erase_stream: stream must be a torch.npu.Stream, got {type(stream).__name__}")
    if tensor.device.type != "npu":
        raise RuntimeError(f"erase_stream: the tensor is on {tensor.device}, not on an npu device")
    _C._npu_erase_stream(tensor, stream.stream_id, stream.device_index, stream.device_type)


class NPUPluggableAllocator:
    """An allocator of npu tensor memory from two C functions in a shared
    library, as torch.cuda's CUDAPluggableAllocator:

    .. code-block:: c

        void* alloc_fn(ssize_t size, int device, aclrtStream stream);
        void free_fn(void* ptr, ssize_t size, int device, aclrtStream stream);

    ``free_fn`` gets back the size, device and stream ``alloc_fn`` was called
    with. Install it with :func:`change_current_allocator` before the first
    npu tensor is allocated (Note [Pluggable allocators],
    NPUPluggableAllocator.h).

    Raises FileNotFoundError when ``path_to_so_file`` does not exist,
    OSError when it cannot be loaded, AttributeError when it lacks a symbol.
    """

    def __init__(self, path_to_so_file: str, alloc_fn_name: str, free_fn_name: str) -> None:
        import ctypes

        path = os.fspath(path_to_so_file)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"NPUPluggableAllocator: no shared library at {path!r}")
        try:
            library = ctypes.CDLL(path)
        except OSError as e:
            raise OSError(f"NPUPluggableAllocator: cannot load {path!r}: {e}") from e
        addresses = []
        for role, name in (("allocation", alloc_fn_name), ("free", free_fn_name)):
            try:
                function = getattr(library, name)
            except AttributeError:
                raise AttributeError(
                    f"NPUPluggableAllocator: {path!r} has no {role} function {name!r} (is it "
                    f"declared extern \"C\" and exported?)") from None
            addresses.append(ctypes.cast(function, ctypes.c_void_p).value)
        self._library = library  # keeps the library loaded
        self._allocator = _C._npu_customAllocator(*addresses)

    def allocator(self) -> Any:
        """The underlying allocator object, for :func:`change_current_allocator`."""
        return self._allocator


def change_current_allocator(allocator: NPUPluggableAllocator) -> None:
    """Makes ``allocator`` the allocator of npu tensors, for the rest of the
    process. Raises RuntimeError if npu tensor memory was allocated already
    or an allocator was installed before (Note [Pluggable allocators])."""
    if not isinstance(allocator, NPUPluggableAllocator):
        raise TypeError("change_current_allocator: expected a torch.npu.memory.NPUPluggableAllocator, "
                        f"got {type(allocator).__name__}")
    _C._npu_changeCurrentAllocator(allocator.allocator())
    global _allocator_backend
    _allocator_backend = "pluggable"


#: What get_allocator_backend reports; change_current_allocator sets it.
_allocator_backend = "native"


def get_allocator_backend() -> str:
    """The allocator of npu tensors: ``"native"`` (the caching allocator) or
    ``"pluggable"`` once :func:`change_current_allocator` installed one, as
    torch.cuda.get_allocator_backend names them."""
    return _allocator_backend


def _set_allocator_settings(settings: str) -> None:
    """Changes the caching allocator's settings at run time.

    ``settings`` has the form of ``PYTORCH_NPU_ALLOC_CONF``: comma-separated
    ``key:value`` entries (``expandable_segments``, ``max_split_size_mb``,
    ``garbage_collection_threshold``, ``roundup_power2_divisions``,
    ``base_addr_aligned_kb``, ``page_size``, ``segment_size_mb``,
    ``large_segment_size_mb``), parsed over the current
    settings, so keys it does not name keep their values. The allocators of
    every device take the new settings for their next requests; memory
    already cached stays where it is. An unknown key or a bad value raises
    RuntimeError naming the key and what it accepts, and changes nothing.
    ``expandable_segments:True`` makes new memory grow one virtual range per
    stream (Note [Expandable segments], NPUCachingAllocator.h); switched at
    run time it applies to memory allocated from then on.

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
