"""NpuFusedAdam: torch.optim.Adam (L2 weight decay), multi-tensor."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from torch import Tensor
from torch.optim.adam import adam
from torch.optim.optimizer import ParamsT

from ._tensor_lists import ADAM_STATE, torch_optim_foreach_options, zeros_like_param
from ._validation import BETAS, EPS, LR, WEIGHT_DECAY
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
    _hyper_parameter_rules = (LR, EPS, BETAS, WEIGHT_DECAY)
    _options_added_later = {"amsgrad": False}

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
    ) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)
        super().__init__(params, defaults)

    def _step_group(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor]) -> None:
        amsgrad = group["amsgrad"]
        # AMSGrad's maximum is made when first needed, also when a group
        # turns amsgrad on after some steps.
        state = self._state_lists(params, ADAM_STATE, {"max_exp_avg_sq": zeros_like_param} if amsgrad else {})
        beta1, beta2 = group["betas"]
        self._update(
            params,
            grads,
            state["exp_avg"],
            state["exp_avg_sq"],
            state.get("max_exp_avg_sq", []),
            state["step"],
            fused=False,
            amsgrad=amsgrad,
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            **torch_optim_foreach_options(params),
        )
