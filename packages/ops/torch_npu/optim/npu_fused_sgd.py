"""NpuFusedSGD: torch.optim.SGD, multi-tensor."""

from __future__ import annotations

from typing import Any, Dict

from torch.optim.optimizer import ParamsT, required
from torch.optim.sgd import sgd

from ._validation import require_non_negative
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

    def __init__(
        self,
        params: ParamsT,
        lr: float = required,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ) -> None:
        owner = type(self).__name__
        if lr is not required:
            require_non_negative(owner, "learning rate", lr, "lr")
        require_non_negative(owner, "momentum value", momentum, "momentum")
        require_non_negative(owner, "weight_decay value", weight_decay, "weight_decay")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(
                f"Nesterov momentum requires a momentum and zero dampening: {owner} got "
                f"momentum={momentum!r}, dampening={dampening!r}; use momentum > 0 and dampening=0, "
                "or nesterov=False."
            )
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)

    def _step_group(self, group: Dict[str, Any]) -> None:
        params, grads = self._params_with_grads(group)
        if not params:
            return
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
