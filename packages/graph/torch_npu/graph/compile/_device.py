"""What Dynamo and Inductor need to know about the npu device: its
:class:`DeviceInterface` (streams, events, synchronize, current device) and
the snippets Inductor's wrapper code uses for it (:class:`NPUDeviceOpOverrides`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface, caching_worker_current_devices
from torch._inductor.codegen.common import DeviceOpOverrides


def get_raw_stream(device_index: int) -> int:
    """The current npu stream of ``device_index`` as the integer the wrapper
    code passes to kernels (the stream's id; kernels unpack it with the
    device index, as c10 streams are packed)."""
    return torch.npu.current_stream(device_index).stream_id


class _InductorDeviceProperties:
    """torch.npu's device properties plus what Inductor's heuristics read:
    one "multiprocessor", since an npu kernel runs on one worker thread (so
    Inductor does not split reductions into partial kernels)."""

    multi_processor_count = 1

    def __init__(self, properties: Any) -> None:
        self._properties = properties

    def __getattr__(self, name: str) -> Any:
        return getattr(self._properties, name)


def _device_properties(device: torch.types.Device = None) -> Any:
    return _InductorDeviceProperties(torch.npu.get_device_properties(device))


class NPUInterface(DeviceInterface):
    """torch.npu as Dynamo's device interface for ``npu``."""

    device = torch.npu.device  # type: ignore[assignment]
    Event = torch.npu.Event  # type: ignore[assignment]
    Stream = torch.npu.Stream  # type: ignore[assignment]

    class Worker:
        """Device queries that Inductor's compile workers may make without
        initialising the device in a subprocess."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices["npu"] = device

        @staticmethod
        def current_device() -> int:
            if "npu" in caching_worker_current_devices:
                return caching_worker_current_devices["npu"]
            return torch.npu.current_device()

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> Any:
            return _device_properties(device)

    current_device = staticmethod(torch.npu.current_device)
    set_device = staticmethod(torch.npu.set_device)
    device_count = staticmethod(torch.npu.device_count)
    is_available = staticmethod(torch.npu.is_available)
    stream = staticmethod(torch.npu.stream)
    current_stream = staticmethod(torch.npu.current_stream)
    set_stream = staticmethod(torch.npu.set_stream)
    synchronize = staticmethod(torch.npu.synchronize)
    get_raw_stream = staticmethod(get_raw_stream)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        previous = torch.npu.current_device()
        if device >= 0 and device != previous:
            torch.npu.set_device(device)
        return previous

    exchange_device = maybe_exchange_device

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.npu.set_stream(torch.Stream(stream_id=stream_id, device_index=device_index,
                                          device_type=device_type))

    @staticmethod
    def get_device_properties(device: torch.types.Device = None) -> Any:  # type: ignore[override]
        return _device_properties(device)

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> str:
        return ""

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @classmethod
    def is_dtype_supported(cls, dtype: torch.dtype, including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def memory_allocated(device: torch.types.Device = None) -> int:
        return torch.npu.memory_allocated(device)

    @staticmethod
    def is_triton_capable(device: torch.types.Device = None) -> bool:
        # npu kernels come from MLIR (see torch_npu.graph.compile), not Triton.
        return False


class NPUDeviceOpOverrides(DeviceOpOverrides):
    """The lines Inductor's Python wrapper writes for npu."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from torch_npu.graph.compile._device import get_raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.npu.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.npu.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.npu.device({device_idx})"

    def current_stream(self) -> str:
        return "torch.npu.current_stream()"
