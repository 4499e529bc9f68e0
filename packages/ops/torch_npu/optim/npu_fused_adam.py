"""NpuFusedAdam: torch.optim.Adam (L2 weight decay), multi-tensor."""

from __future__ import annotations

from typing import Any, Dict, Tuple

import torch
from torch.optim.adam import adam
from torch.optim.optimizer import ParamsT

from ._tensor_lists import new_step_counter
from ._validation import require_betas, require_non_negative
from .npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedAdam"]


class NpuFusedAdam(NpuFusedOptimizerBase):
    """Adam, with weight decay as an L2 penalty added to the gradient.

    Exactly :class:`torch.optim.Adam` (same state, same results) run with
    ``foreach=True``: multi-tensor ops over a whole param group.
    :class:`NpuFusedAdamW` is the decoupled-weight-decay variant.

    Args:
        params: the parameters to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-3).
        betas: coefficients of the running averages of the gradient and of
            its square (default: (0.9, 0.999)).
        eps: added to the denominator for numerical stability (default: 1e-8).
        weight_decay: L2 penalty (default: 0).
        amsgrad: use the AMSGrad variant (default: False).

    Raises:
        ValueError: a hyper-parameter is out of range.
    """

    #: The functional torch.optim update this optimizer runs.
    _update = staticmethod(adam)

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
    ) -> None:
        owner = type(self).__name__
        require_non_negative(owner, "learning rate", lr, "lr")
        require_non_negative(owner, "epsilon value", eps, "eps")
        betas = require_betas(owner, betas)
        require_non_negative(owner, "weight_decay value", weight_decay, "weight_decay")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)
        super().__init__(params, defaults)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)

    def _step_group(self, group: Dict[str, Any]) -> None:
        params, grads = self._params_with_grads(group)
        if not params:
            return
        amsgrad = group["amsgrad"]
        exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps = [], [], [], []
        for p in params:
            state = self.state[p]
            if len(state) == 0:
                state["step"] = new_step_counter()
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            if amsgrad and "max_exp_avg_sq" not in state:
                state["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            steps.append(state["step"])
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            if amsgrad:
                max_exp_avg_sqs.append(state["max_exp_avg_sq"])
        beta1, beta2 = group["betas"]
        self._update(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            max_exp_avg_sqs,
            steps,
            foreach=True,
            capturable=False,
            differentiable=False,
            fused=False,
            has_complex=any(torch.is_complex(p) for p in params),
            amsgrad=amsgrad,
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            maximize=False,
        )
