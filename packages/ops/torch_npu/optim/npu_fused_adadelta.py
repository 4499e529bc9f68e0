"""NpuFusedAdadelta: torch.optim.Adadelta, multi-tensor."""

from __future__ import annotations

from typing import Any, Dict

import torch
from torch.optim.adadelta import adadelta
from torch.optim.optimizer import ParamsT

from ._tensor_lists import new_step_counter
from ._validation import require_fraction, require_non_negative
from .npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedAdadelta"]


class NpuFusedAdadelta(NpuFusedOptimizerBase):
    """Adadelta.

    Exactly :class:`torch.optim.Adadelta` (same state, same results) run with
    ``foreach=True``: multi-tensor ops over a whole param group.

    Args:
        params: the parameters to optimize, or dicts defining param groups.
        lr: coefficient that scales the delta before it is applied to the
            parameters (default: 1.0).
        rho: coefficient of the running averages of squared gradients and
            squared deltas (default: 0.9).
        eps: added inside the square roots for numerical stability
            (default: 1e-6).
        weight_decay: L2 penalty added to the gradient (default: 0).

    Raises:
        ValueError: a hyper-parameter is out of range.
    """

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
    ) -> None:
        owner = type(self).__name__
        require_non_negative(owner, "learning rate", lr, "lr")
        require_fraction(owner, "rho value", rho, "rho", one_allowed=True)
        require_non_negative(owner, "epsilon value", eps, "eps")
        require_non_negative(owner, "weight_decay value", weight_decay, "weight_decay")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)

    def _step_group(self, group: Dict[str, Any]) -> None:
        params, grads = self._params_with_grads(group)
        if not params:
            return
        square_avgs, acc_deltas, steps = [], [], []
        for p in params:
            state = self.state[p]
            if len(state) == 0:
                state["step"] = new_step_counter()
                state["square_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["acc_delta"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            steps.append(state["step"])
            square_avgs.append(state["square_avg"])
            acc_deltas.append(state["acc_delta"])
        adadelta(
            params,
            grads,
            square_avgs,
            acc_deltas,
            steps,
            capturable=False,
            foreach=True,
            differentiable=False,
            has_complex=any(torch.is_complex(p) for p in params),
            lr=group["lr"],
            rho=group["rho"],
            eps=group["eps"],
            weight_decay=group["weight_decay"],
            maximize=False,
        )
