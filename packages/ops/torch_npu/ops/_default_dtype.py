"""Queued npu work computes in the default dtype of its call.

Note [Work queued before a default dtype change]
An op of integer (or bool) tensors whose result is floating (true division,
sqrt, exp, atan2, ...) computes in torch's default dtype. On the CPU and on
CUDA that dtype is read at the call. An npu op runs the CPU kernel later, on
the stream's worker, and the CPU kernel reads the default dtype when it runs:
``with set_default_dtype(torch.double): y = a / b`` (a, b int32 on npu) gave
a float64 ``y`` holding values computed in float32 whenever the work ran
after the ``with`` ended. The default dtype is process-wide, not per thread,
so the worker cannot be given its own. Instead every change of the default
dtype (``torch.set_default_dtype``, ``torch.set_default_tensor_type`` and
their context managers, which all go through ``torch._C``) first waits for
the work queued on each initialised npu device, so all work runs with the
default dtype of its call. A change that keeps the dtype waits for nothing,
nor does one while the current stream is being captured (a graph's work runs
at replays, whose default dtype is the replay's, as for CUDA graphs of
kernels that read nothing at launch).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch


def install() -> None:
    """Wraps torch._C's setters of the default dtype (idempotent)."""
    for name in ("_set_default_dtype", "_set_default_tensor_type"):
        setter = getattr(torch._C, name, None)
        if setter is None or getattr(setter, "_npu_waits_for_queued_work", False):
            continue
        setattr(torch._C, name, _waiting_first(setter, keeps_dtype=_KEEPS_DTYPE.get(name)))


def _same_dtype(dtype: Any = None, *args: Any, **kwargs: Any) -> bool:
    return dtype is torch.get_default_dtype()


# For each setter, whether a call leaves the default dtype as it is.
_KEEPS_DTYPE: dict[str, Callable[..., bool]] = {"_set_default_dtype": _same_dtype}


def _waiting_first(setter: Callable[..., Any], keeps_dtype: Callable[..., bool] | None) -> Callable[..., Any]:
    @functools.wraps(setter)
    def set_default(*args: Any, **kwargs: Any) -> Any:
        if keeps_dtype is None or not keeps_dtype(*args, **kwargs):
            _wait_for_queued_work()
        return setter(*args, **kwargs)

    set_default._npu_waits_for_queued_work = True  # type: ignore[attr-defined]
    return set_default


def _wait_for_queued_work() -> None:
    npu = torch.npu
    if not npu.is_initialized():
        return
    import torch_npu

    stream = npu.current_stream()
    if torch_npu._C._npu_capture_status(stream.stream_id, stream.device_index) != 0:
        return
    for index in range(npu.device_count()):
        npu.synchronize(index)
