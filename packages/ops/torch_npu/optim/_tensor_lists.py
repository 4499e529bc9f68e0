"""Helpers for the multi-tensor (``torch._foreach_*``) code of the fused optimizers.

A ``torch._foreach_*`` op takes a whole list of tensors (a backend with
multi-tensor kernels launches one kernel for it: what "fused" means on a
device), but a list must hold tensors of one device and, for those kernels,
one dtype. The optimizers therefore split a param group's lists by
(device, dtype) first. Also here: the initialisers of per-parameter state
and the list updates more than one optimizer runs.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Sequence, Tuple

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


#: Makes the initial value of one state entry of a parameter from the parameter.
Initialiser = Callable[[Tensor], Tensor]


def new_step_counter(param: Tensor) -> Tensor:
    """The ``state["step"]`` of a new parameter: a CPU scalar tensor, as torch.optim keeps it.

    Keeping it on the host (like torch.optim without ``capturable``) lets the
    bias corrections and schedules be computed as Python floats without a
    device round trip, and makes the optimizers' state dicts look like
    torch.optim's. (``param`` is not used: the signature is an
    :data:`Initialiser`'s.)
    """
    dtype = torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32
    return torch.tensor(0.0, dtype=dtype)


def zeros_like_param(param: Tensor) -> Tensor:
    """A state tensor of zeros with the parameter's shape, dtype, device and layout."""
    return torch.zeros_like(param, memory_format=torch.preserve_format)


def ones_like_param(param: Tensor) -> Tensor:
    """A state tensor of ones with the parameter's shape, dtype, device and layout."""
    return torch.ones_like(param, memory_format=torch.preserve_format)


#: The state of the Adam family (Adam, AdamW, LAMB, BERT Adam, AdamP), in
#: torch.optim.Adam's order: the step count and the two moments.
ADAM_STATE: Mapping[str, Initialiser] = {
    "step": new_step_counter,
    "exp_avg": zeros_like_param,
    "exp_avg_sq": zeros_like_param,
}


def torch_optim_foreach_options(params: Sequence[Tensor]) -> Dict[str, Any]:
    """The options under which a torch.optim functional update (``adam()``, ...) is this package's step.

    Multi-tensor (``foreach``), outside autograd, with the step counts on the
    host (not ``capturable``), minimizing.
    """
    return dict(
        foreach=True,
        capturable=False,
        differentiable=False,
        maximize=False,
        has_complex=any(torch.is_complex(p) for p in params),
    )


def update_moments_(
    exp_avgs: List[Tensor], exp_avg_sqs: List[Tensor], grads: List[Tensor], beta1: float, beta2: float
) -> None:
    """Adam's running averages, in place: ``m = beta1 * m + (1 - beta1) * g``, ``v = beta2 * v + (1 - beta2) * g * g``."""
    torch._foreach_mul_(exp_avgs, beta1)
    torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
    torch._foreach_mul_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)


def adam_directions(exp_avgs: List[Tensor], exp_avg_sqs: List[Tensor], eps: float) -> List[Tensor]:
    """``m / (sqrt(v) + eps)`` per parameter, without bias correction (as LAMB and BERT Adam use it)."""
    denominators = torch._foreach_sqrt(exp_avg_sqs)
    torch._foreach_add_(denominators, eps)
    return torch._foreach_div(exp_avgs, denominators)
