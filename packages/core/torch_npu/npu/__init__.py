"""torch.npu: the npu device module (the same module as ``torch_npu.npu``).

Mirrors ``torch.cuda``: devices, streams and events, memory statistics and
the random number generator state of npu devices.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from .. import _C
from ._cann import get_cann_version, is_cann_feature_available, require_cann_feature
from ._cann import _warn_if_unsupported as _warn_if_unsupported_cann
from ._amp_support import get_amp_supported_dtype
# Private re-exports used by plugins and by torch's device-module protocol.
from ._amp_support import _register_amp_supported_dtypes as _register_amp_supported_dtypes
from ._device import _get_device_index as _get_device_index
from ._device import (
    can_device_access_peer,
    current_device,
    device,
    device_count,
    device_of,
    get_device_capability,
    get_device_name,
    get_device_properties,
    is_available,
    is_bf16_supported,
    current_blas_handle,
    set_device,
    synchronize,
    utilization,
)
from ._autocast_state import get_autocast_dtype, is_autocast_enabled, set_autocast_dtype, set_autocast_enabled
from ._sync_debug import get_sync_debug_mode, set_sync_debug_mode
from ._options import (
    CubeMathType,
    config,
    conv,
    get_mm_bmm_format_nd,
    is_jit_compile_false,
    matmul,
    set_compile_mode,
    set_mm_bmm_format_nd,
    set_option,
)
from ._tensor_types import (
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)
from .memory import (
    NPUPluggableAllocator,
    change_current_allocator,
    empty_cache,
    get_allocator_backend,
    host_empty_cache,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    max_memory_cached,
    memory_cached,
    memory_snapshot,
    memory_stats_as_nested_dict,
    reset_accumulated_host_memory_stats,
    reset_max_memory_cached,
    reset_peak_host_memory_stats,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
    get_per_process_memory_fraction,
    MemPool,
    caching_allocator_alloc,
    caching_allocator_delete,
    memory_summary,
    use_mem_pool,
)
from . import memory as _memory
from .random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from ._mstx import mstx
from .streams import (
    Event,
    ExternalStream,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)

from ._storage_types import STORAGE_CLASSES as _STORAGE_CLASSES

globals().update(_STORAGE_CLASSES)  # torch.npu.FloatStorage, ... (names from torch's table)

_init_lock = threading.Lock()

# torch.manual_seed seeds custom backends only if the device module has these.
_is_in_bad_fork = _C._is_in_bad_fork


def init() -> None:
    """Initializes the NPU runtime (done lazily on first use otherwise)."""
    _lazy_init()


def is_initialized() -> bool:
    """Whether the NPU runtime has been initialized in this process."""
    return bool(_C._is_initialized())


def _lazy_init() -> None:
    if _C._is_initialized():
        return
    with _init_lock:
        if _C._is_in_bad_fork():
            raise RuntimeError(
                "Cannot re-initialize NPU in forked subprocess. To use NPU with "
                "multiprocessing, you must use the 'spawn' start method"
            )
        _C._init()
        _warn_if_unsupported_cann()


def ipc_collect() -> None:
    """Frees the npu memory this process shared with other processes through
    :mod:`torch.multiprocessing` once they released it (as
    :func:`torch.cuda.ipc_collect`; Note [npu tensors between processes])."""
    from ..multiprocessing import ipc_collect as collect

    collect()


#: torch.npu.OutOfMemoryError: what an allocation beyond the device's memory
#: raises (the same class as torch.OutOfMemoryError and
#: torch.cuda.OutOfMemoryError, so ``except`` clauses written for either work).
OutOfMemoryError = torch.OutOfMemoryError


def _sleep(cycles: int) -> None:
    """Enqueues device work on the current stream that spins for ``cycles``
    device clock cycles, like ``torch.cuda._sleep`` (a testing aid).

    The simulator's device clock is nominally 1 GHz
    (:func:`_cycles_per_ms` cycles per millisecond)."""
    _lazy_init()
    _C._sleep(int(cycles))


def _cycles_per_ms() -> int:
    """Device clock cycles per millisecond, for :func:`_sleep` (the
    simulator's nominal 1 GHz clock; ``get_cycles_per_ms`` of torch's test
    utilities measures the same for CUDA)."""
    return int(_C._sleep_cycles_per_ms())


def _get_generator(device: torch.device) -> torch.Generator:
    """The default generator of npu ``device`` (current device without an
    index); what torch's device-generic code asks a device module for."""
    index = device.index if device.index is not None else current_device()
    _C._check_device_index(index)
    return _C._default_generator(index)


def __getattr__(name: str) -> Any:
    if name == "default_generators":
        return tuple(_C._default_generator(i) for i in range(device_count()))
    if name == "_initialized":
        # torch.utils.checkpoint and torch.random.fork_rng save and restore
        # a device's RNG state only when its module says it is initialized
        # (torch.cuda keeps a global of that name); computed, so it is never
        # stale.
        return is_initialized()
    raise AttributeError(f"module 'torch.npu' has no attribute '{name}'")


__all__ = [
    "BFloat16Tensor",
    "BoolTensor",
    "ByteTensor",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "can_device_access_peer",
    "change_current_allocator",
    "CharTensor",
    "config",
    "conv",
    "CubeMathType",
    "current_blas_handle",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "DoubleTensor",
    "empty_cache",
    "Event",
    "ExternalStream",
    "FloatTensor",
    "get_allocator_backend",
    "get_amp_supported_dtype",
    "get_autocast_dtype",
    "get_cann_version",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_mm_bmm_format_nd",
    "get_per_process_memory_fraction",
    "get_rng_state",
    "get_rng_state_all",
    "get_sync_debug_mode",
    "HalfTensor",
    "host_empty_cache",
    "host_memory_stats",
    "host_memory_stats_as_nested_dict",
    "init",
    "initial_seed",
    "IntTensor",
    "ipc_collect",
    "is_autocast_enabled",
    "is_available",
    "is_bf16_supported",
    "is_cann_feature_available",
    "is_initialized",
    "is_jit_compile_false",
    "LongTensor",
    "manual_seed",
    "manual_seed_all",
    "matmul",
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "MemPool",
    "mstx",
    "NPUPluggableAllocator",
    "OutOfMemoryError",
    "require_cann_feature",
    "reset_accumulated_host_memory_stats",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_host_memory_stats",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_autocast_dtype",
    "set_autocast_enabled",
    "set_compile_mode",
    "set_device",
    "set_mm_bmm_format_nd",
    "set_option",
    "set_per_process_memory_fraction",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "set_sync_debug_mode",
    "ShortTensor",
    "Stream",
    "stream",
    "StreamContext",
    "synchronize",
    "use_mem_pool",
    "utilization",
]
__all__ += sorted(_STORAGE_CLASSES)

# OOM_SNAPSHOT_ENABLE / OOM_SNAPSHOT_PATH (memory._install_oom_snapshot).
_memory._install_oom_snapshot()
