"""torch.save / torch.load of npu tensors.

torch serializes npu storages by location tag (``"npu:0"``). Loading goes
through torch's registry of device deserializers; ours runs first so that a
``map_location`` naming a device this process does not have fails with the
same message as every other device-index check.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.serialization

from . import _C

_PRIORITY = 19  # before torch's generic PrivateUse1 handler (23)


def _tag(obj: Any) -> str | None:
    if obj.device.type == "npu":
        return f"npu:{obj.device.index}"
    return None


def _deserialize(obj: Any, location: str) -> Any:
    if not location.startswith("npu"):
        return None
    index = torch.device(location).index
    if index is None:
        index = _C._get_device()
    try:
        _C._check_device_index(index)
    except RuntimeError as error:
        raise RuntimeError(
            f"Attempting to deserialize object on NPU device {location!r}: {error} "
            "Use torch.load with map_location to map the storages to an existing device "
            "(map_location='npu:0', or 'cpu', or a dict such as {'npu:3': 'npu:0'})."
        ) from None
    return obj.npu(index)


def register() -> None:
    """Registers the npu tagger/deserializer with torch.serialization (idempotent)."""
    registry = torch.serialization._package_registry
    if any(entry[1] is _tag for entry in registry):
        return
    torch.serialization.register_package(_PRIORITY, _tag, _deserialize)
