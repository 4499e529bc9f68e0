"""NpuFusedAdadelta: torch.optim.Adadelta, multi-tensor."""

from __future__ import annotations

from typing import Any, Dict, List

from torch import Tensor
from torch.optim.adadelta import adadelta
from torch.optim.optimizer import ParamsT

from ._tensor_lists import new_step_counter, torch_optim_foreach_options, zeros_like_param
from ._validation import EPS, LR, WEIGHT_DECAY, fraction
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

    _hyper_parameter_rules = (LR, fraction("rho", "rho value", one_allowed=True), EPS, WEIGHT_DECAY)

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
    ) -> None:
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)

    def _step_group(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor]) -> None:
        state = self._state_lists(
            params, {"step": new_step_counter, "square_avg": zeros_like_param, "acc_delta": zeros_like_param})
        adadelta(
            params,
            grads,
            state["square_avg"],
            state["acc_delta"],
            state["step"],
            lr=group["lr"],
            rho=group["rho"],
            eps=group["eps"],
            weight_decay=group["weight_decay"],
            **torch_optim_foreach_options(params),
        )
