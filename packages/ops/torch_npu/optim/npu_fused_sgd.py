"""NpuFusedSGD: torch.optim.SGD, multi-tensor."""

from __future__ import annotations

from typing import Any, Dict, List

from torch import Tensor
from torch.optim.optimizer import ParamsT, required
from torch.optim.sgd import sgd

from ._validation import LR, MOMENTUM, WEIGHT_DECAY
from .npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedSGD"]


class NpuFusedSGD(NpuFusedOptimizerBase):
    """Stochastic gradient descent, optionally with (Nesterov) momentum.

    Exactly :class:`torch.optim.SGD` (same state, same results) run with
    ``foreach=True``: multi-tensor ops over a whole param group.
    ``state[p]["momentum_buffer"]`` starts as the first (weight-decayed)
    gradient.

    Args:
        params: the parameters to optimize, or dicts defining param groups.
        lr: learning rate (required).
        momentum: momentum factor (default: 0).
        dampening: dampening for momentum (default: 0).
        weight_decay: L2 penalty added to the gradient (default: 0).
        nesterov: use Nesterov momentum; needs ``momentum > 0`` and
            ``dampening == 0`` (default: False).

    Raises:
        ValueError: a hyper-parameter is out of range.
    """

    _hyper_parameter_rules = (LR, MOMENTUM, WEIGHT_DECAY)
    _options_added_later = {"nesterov": False}

    def __init__(
        self,
        params: ParamsT,
        lr: float = required,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ) -> None:
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults)

    def _check_hyper_parameters(self, default: Dict[str, Any]) -> Dict[str, Any]:
        default = super()._check_hyper_parameters(default)
        momentum, dampening = default["momentum"], default["dampening"]
        if default["nesterov"] and (momentum <= 0 or dampening != 0):
            raise ValueError(
                f"Nesterov momentum requires a momentum and zero dampening: {type(self).__name__} got "
                f"momentum={momentum!r}, dampening={dampening!r}; use momentum > 0 and dampening=0, "
                "or nesterov=False."
            )
        return default

    def _step_group(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor]) -> None:
        momentum = group["momentum"]
        # torch.optim's sgd() creates the buffers it finds missing (None) and
        # hands them back through the list.
        buffers = [self.state[p].get("momentum_buffer") for p in params] if momentum != 0 else []
        sgd(
            params,
            grads,
            buffers,
            has_sparse_grad=False,
            foreach=True,
            fused=False,
            weight_decay=group["weight_decay"],
            momentum=momentum,
            lr=group["lr"],
            dampening=group["dampening"],
            nesterov=group["nesterov"],
            maximize=False,
        )
        for p, buffer in zip(params, buffers):
            self.state[p]["momentum_buffer"] = buffer
