"""Legacy typed storages: torch.npu.FloatStorage and friends.

``tensor.storage_type()`` of an npu tensor and code written for Ascend's
torch_npu look these up (``torch.npu.FloatStorage``), as ``torch.cuda``'s.
They are torch's legacy storage classes bound to npu: ``__module__`` is
"torch.npu", from which torch's TypedStorage takes their device. Their names
and dtypes are torch's own table (``torch.storage._dtype_to_storage_type_map``).
"""

from __future__ import annotations

from typing import Any, Dict

import torch
from torch.storage import _dtype_to_storage_type_map, _LegacyStorage, _warn_typed_storage_removal
from torch._utils import classproperty


class _NPULegacyStorage(_LegacyStorage):
    @classmethod
    def from_buffer(cls, *args: Any, **kwargs: Any) -> Any:
        _warn_typed_storage_removal()
        raise RuntimeError("from_buffer: not available for npu storage (it reads host memory)")

    @classmethod
    def _new_with_weak_ptr(cls, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("_new_with_weak_ptr: not available for npu storage")

    @classmethod
    def _new_shared_filename(cls, manager: Any, obj: Any, size: int, *, device: Any = None, dtype: Any = None) -> Any:
        raise RuntimeError("_new_shared_filename: not available for npu storage")


def _make(name: str, dtype: torch.dtype) -> type:
    def _dtype(cls: type) -> torch.dtype:
        return dtype

    def public_dtype(cls: type) -> torch.dtype:
        _warn_typed_storage_removal()
        return dtype

    namespace = {"_dtype": classproperty(_dtype), "dtype": classproperty(public_dtype), "__module__": "torch.npu"}
    return type(name, (_NPULegacyStorage,), namespace)


#: name -> class, one per dtype torch has a legacy storage class for.
STORAGE_CLASSES: Dict[str, type] = {
    name: _make(name, dtype) for dtype, name in _dtype_to_storage_type_map().items()
}
