"""torch.npu: the npu device module (the same module as ``torch_npu.npu``).

Mirrors ``torch.cuda``: devices, streams and events, memory statistics and
the random number generator state of npu devices.
"""

from __future__ import annotations

import threading
from typing import Any

from .. import _C
from ._cann import get_cann_version, is_cann_feature_available, require_cann_feature
from ._cann import _warn_if_unsupported as _warn_if_unsupported_cann
from ._amp_support import get_amp_supported_dtype
# Private re-exports used by plugins and by torch's device-module protocol.
from ._amp_support import _register_amp_supported_dtypes as _register_amp_supported_dtypes
from ._device import _get_device_index as _get_device_index
from ._device import (
    current_device,
    device,
    device_count,
    device_of,
    get_device_capability,
    get_device_name,
    get_device_properties,
    is_available,
    is_bf16_supported,
    set_device,
    synchronize,
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
    empty_cache,
    host_memory_stats,
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
)
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
from .streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)

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


def _sleep(ms: float) -> None:
    """Enqueues device work on the current stream that just takes ``ms``
    milliseconds (a testing aid, like torch.cuda._sleep)."""
    _lazy_init()
    _C._sleep(float(ms))


def __getattr__(name: str) -> Any:
    if name == "default_generators":
        return tuple(_C._default_generator(i) for i in range(device_count()))
    raise AttributeError(f"module 'torch.npu' has no attribute '{name}'")


__all__ = [
    "get_cann_version",
    "is_cann_feature_available",
    "require_cann_feature",
    "BFloat16Tensor",
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "Event",
    "FloatTensor",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
    "Stream",
    "StreamContext",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_per_process_memory_fraction",
    "get_rng_state",
    "get_rng_state_all",
    "host_memory_stats",
    "init",
    "initial_seed",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_per_process_memory_fraction",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
]
