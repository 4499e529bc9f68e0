"""NpuFusedRMSprop: torch.optim.RMSprop, multi-tensor."""

from __future__ import annotations

from typing import Any, Dict, List

from torch import Tensor
from torch.optim.optimizer import ParamsT
from torch.optim.rmsprop import rmsprop

from ._tensor_lists import Initialiser, new_step_counter, torch_optim_foreach_options, zeros_like_param
from ._validation import EPS, LR, MOMENTUM, WEIGHT_DECAY, non_negative
from .npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedRMSprop"]

#: The checks of both RMSprop flavours, in torch_npu's order.
RMSPROP_RULES = (LR, EPS, MOMENTUM, WEIGHT_DECAY, non_negative("alpha", "alpha value"))


def rmsprop_optional_state(group: Dict[str, Any]) -> Dict[str, Initialiser]:
    """The state entries of both RMSprop flavours that only some options need.

    They are made when first needed, also when a group turns its option on
    after some steps.
    """
    optional: Dict[str, Initialiser] = {}
    if group["momentum"] > 0:
        optional["momentum_buffer"] = zeros_like_param
    if group["centered"]:
        optional["grad_avg"] = zeros_like_param
    return optional


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

    _hyper_parameter_rules = RMSPROP_RULES
    _options_added_later = {"momentum": 0, "centered": False}

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
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                        centered=centered, weight_decay=weight_decay)
        super().__init__(params, defaults)

    def _step_group(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor]) -> None:
        state = self._state_lists(
            params, {"step": new_step_counter, "square_avg": zeros_like_param}, rmsprop_optional_state(group))
        rmsprop(
            params,
            grads,
            state["square_avg"],
            state.get("grad_avg", []),
            state.get("momentum_buffer", []),
            state["step"],
            lr=group["lr"],
            alpha=group["alpha"],
            eps=group["eps"],
            weight_decay=group["weight_decay"],
            momentum=group["momentum"],
            centered=group["centered"],
            **torch_optim_foreach_options(params),
        )
