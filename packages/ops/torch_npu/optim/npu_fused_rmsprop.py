"""NpuFusedRMSprop: torch.optim.RMSprop, multi-tensor."""

from __future__ import annotations

from typing import Any, Dict

import torch
from torch.optim.optimizer import ParamsT
from torch.optim.rmsprop import rmsprop

from ._tensor_lists import new_step_counter
from ._validation import require_non_negative
from .npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedRMSprop"]


class NpuFusedRMSprop(NpuFusedOptimizerBase):
    """RMSprop, PyTorch flavour: eps is added after the square root.

    Exactly :class:`torch.optim.RMSprop` (same state, same results) run with
    ``foreach=True``: multi-tensor ops over a whole param group.
    The effective step is ``lr / (sqrt(v) + eps)``; :class:`NpuFusedRMSpropTF`
    is the TensorFlow flavour.

    Args:
        params: the parameters to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-2).
        alpha: smoothing constant of the average of squared gradients
            (default: 0.99).
        eps: added to the denominator for numerical stability (default: 1e-8).
        weight_decay: L2 penalty added to the gradient (default: 0).
        momentum: momentum factor (default: 0).
        centered: normalize by an estimate of the gradient's variance
            instead of its second moment (default: False).

    Raises:
        ValueError: a hyper-parameter is out of range.
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
    ) -> None:
        owner = type(self).__name__
        require_non_negative(owner, "learning rate", lr, "lr")
        require_non_negative(owner, "epsilon value", eps, "eps")
        require_non_negative(owner, "momentum value", momentum, "momentum")
        require_non_negative(owner, "weight_decay value", weight_decay, "weight_decay")
        require_non_negative(owner, "alpha value", alpha, "alpha")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                        centered=centered, weight_decay=weight_decay)
        super().__init__(params, defaults)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)

    def _step_group(self, group: Dict[str, Any]) -> None:
        params, grads = self._params_with_grads(group)
        if not params:
            return
        momentum, centered = group["momentum"], group["centered"]
        square_avgs, grad_avgs, buffers, steps = [], [], [], []
        for p in params:
            state = self.state[p]
            if len(state) == 0:
                state["step"] = new_step_counter()
                state["square_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            # Created when first needed, also when a group turns them on later.
            if momentum > 0 and "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            if centered and "grad_avg" not in state:
                state["grad_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            steps.append(state["step"])
            square_avgs.append(state["square_avg"])
            if momentum > 0:
                buffers.append(state["momentum_buffer"])
            if centered:
                grad_avgs.append(state["grad_avg"])
        rmsprop(
            params,
            grads,
            square_avgs,
            grad_avgs,
            buffers,
            steps,
            foreach=True,
            maximize=False,
            differentiable=False,
            capturable=False,
            has_complex=any(torch.is_complex(p) for p in params),
            lr=group["lr"],
            alpha=group["alpha"],
            eps=group["eps"],
            weight_decay=group["weight_decay"],
            momentum=momentum,
            centered=centered,
        )
