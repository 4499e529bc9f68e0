"""Legacy typed constructors: torch.npu.FloatTensor and friends.

``torch.npu.FloatTensor(2, 3)`` makes an uninitialized 2x3 float npu tensor,
``torch.npu.FloatTensor([1, 2])`` one from data, and
``isinstance(t, torch.npu.FloatTensor)`` is true for float32 npu tensors.
"""

from __future__ import annotations

from typing import Any

import torch


class _NPUTensorType(type):
    dtype: torch.dtype

    def __instancecheck__(cls, obj: Any) -> bool:
        return (
            isinstance(obj, torch.Tensor) and obj.device.type == "npu" and obj.dtype == cls.dtype
        )


class _NPUTensorBase(metaclass=_NPUTensorType):
    dtype: torch.dtype = torch.float32

    def __new__(cls, *args: Any, **kwargs: Any) -> torch.Tensor:  # type: ignore[misc]
        device = kwargs.pop("device", "npu")
        if kwargs:
            raise TypeError(f"unexpected keyword arguments {sorted(kwargs)}")
        if len(args) == 1 and isinstance(args[0], torch.Size):
            args = tuple(args[0])
        if all(isinstance(a, int) for a in args):
            return torch.empty(args, dtype=cls.dtype, device=device)
        if len(args) == 1:
            data = args[0]
            if isinstance(data, torch.Tensor):
                return data.to(device=device, dtype=cls.dtype)
            return torch.tensor(data, dtype=cls.dtype).to(device)
        raise TypeError(f"{cls.__name__}() takes sizes or one sequence of data, got {args!r}")


def _make(name: str, dtype: torch.dtype) -> type:
    return _NPUTensorType(name, (_NPUTensorBase,), {"dtype": dtype, "__module__": "torch.npu"})


FloatTensor = _make("FloatTensor", torch.float32)
DoubleTensor = _make("DoubleTensor", torch.float64)
HalfTensor = _make("HalfTensor", torch.float16)
BFloat16Tensor = _make("BFloat16Tensor", torch.bfloat16)
ByteTensor = _make("ByteTensor", torch.uint8)
CharTensor = _make("CharTensor", torch.int8)
ShortTensor = _make("ShortTensor", torch.int16)
IntTensor = _make("IntTensor", torch.int32)
LongTensor = _make("LongTensor", torch.int64)
BoolTensor = _make("BoolTensor", torch.bool)
