"""Helpers for the multi-tensor (``torch._foreach_*``) code of the fused optimizers.

A ``torch._foreach_*`` op takes a whole list of tensors (a backend with
multi-tensor kernels launches one kernel for it: what "fused" means on a
device), but a list must hold tensors of one device and, for those kernels,
one dtype. The optimizers therefore split a param group's lists by
(device, dtype) first.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import torch
from torch import Tensor

__all__: list = []


def group_by_device_and_dtype(
    *lists: Sequence[Any],
) -> Dict[Tuple[torch.device, torch.dtype], Tuple[List[Any], ...]]:
    """Splits parallel lists by the (device, dtype) of the first list's tensors.

    ``lists[0]`` holds tensors (usually the params); element ``i`` of every
    list (tensors or per-parameter numbers) belongs to
    parameter ``i`` and stays aligned with it in the output. The order of the
    parameters inside each bucket is the input order.
    """
    buckets: Dict[Tuple[torch.device, torch.dtype], Tuple[List[Any], ...]] = {}
    for index, tensor in enumerate(lists[0]):
        key = (tensor.device, tensor.dtype)
        if key not in buckets:
            buckets[key] = tuple([] for _ in lists)
        for bucket, values in zip(buckets[key], lists):
            bucket.append(values[index])
    return buckets


def new_step_counter() -> Tensor:
    """The ``state["step"]`` of a new parameter: a CPU scalar tensor, as torch.optim keeps it.

    Keeping it on the host (like torch.optim without ``capturable``) lets the
    bias corrections and schedules be computed as Python floats without a
    device round trip, and makes the optimizers' state dicts look like
    torch.optim's.
    """
    dtype = torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32
    return torch.tensor(0.0, dtype=dtype)
