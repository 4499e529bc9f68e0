"""NpuFusedRMSpropTF: RMSprop as TensorFlow computes it, multi-tensor."""

from __future__ import annotations

from typing import Any, Dict, List

import torch
from torch import Tensor
from torch.optim.optimizer import ParamsT

from ._tensor_lists import group_by_device_and_dtype, new_step_counter, ones_like_param
from .npu_fused_optim_base import NpuFusedOptimizerBase
from .npu_fused_rmsprop import RMSPROP_RULES, rmsprop_optional_state

__all__ = ["NpuFusedRMSpropTF"]


class NpuFusedRMSpropTF(NpuFusedOptimizerBase):
    """RMSprop, TensorFlow flavour (as in timm's ``RMSpropTF``).

    It differs from :class:`NpuFusedRMSprop` (PyTorch's) in that eps goes
    inside the square root, the average of squared gradients starts at 1
    (not 0), and with momentum the learning rate is by default applied
    inside the momentum buffer. For each parameter ``p`` with gradient ``g``::

        if weight_decay != 0:
            p -= weight_decay * p                  if decoupled_decay
            g = g + weight_decay * p               otherwise
        v = v + (1 - alpha) * (g * g - v)
        if centered:
            a = a + (1 - alpha) * (g - a)
            d = sqrt(v - a * a + eps)
        else:
            d = sqrt(v + eps)
        if momentum > 0 and lr_in_momentum:
            b = momentum * b + lr * g / d;  p -= b
        elif momentum > 0:
            b = momentum * b + g / d;       p -= lr * b
        else:
            p -= lr * g / d

    The elementwise ops run as multi-tensor ops over a param group; the
    state (``step``, ``square_avg``, ``momentum_buffer``, ``grad_avg``) is kept
    per parameter, in its dtype.

    Args:
        params: the parameters to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-2).
        alpha: smoothing constant (default: 0.9).
        eps: added inside the square root for numerical stability
            (default: 1e-10).
        weight_decay: weight decay (default: 0).
        momentum: momentum factor (default: 0).
        centered: normalize by an estimate of the gradient's variance
            (default: False).
        decoupled_decay: apply the weight decay to the parameter directly
            (``p -= weight_decay * p``, not scaled by lr) instead of adding it
            to the gradient (default: False).
        lr_in_momentum: accumulate ``lr * g / d`` in the momentum buffer, as
            TensorFlow does, instead of scaling the buffer by lr when it is
            applied (default: True).

    Raises:
        ValueError: a hyper-parameter is out of range.
    """

    _hyper_parameter_rules = RMSPROP_RULES
    _options_added_later = {"momentum": 0, "centered": False, "decoupled_decay": False, "lr_in_momentum": True}

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        alpha: float = 0.9,
        eps: float = 1e-10,
        weight_decay: float = 0,
        momentum: float = 0.0,
        centered: bool = False,
        decoupled_decay: bool = False,
        lr_in_momentum: bool = True,
    ) -> None:
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, decoupled_decay=decoupled_decay,
                        lr_in_momentum=lr_in_momentum)
        super().__init__(params, defaults)

    def _step_group(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor]) -> None:
        momentum, centered = group["momentum"], group["centered"]
        # TensorFlow starts the average of squared gradients at 1 (PyTorch
        # at 0), which keeps the first steps small.
        state = self._state_lists(
            params, {"step": new_step_counter, "square_avg": ones_like_param}, rmsprop_optional_state(group))
        torch._foreach_add_(state["step"], 1)

        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        one_minus_alpha = 1.0 - group["alpha"]
        # Placeholders keep the lists aligned for the options that are off
        # (their entries are then never read).
        unused = [None] * len(params)
        buckets = group_by_device_and_dtype(
            params, grads, state["square_avg"], state.get("grad_avg", unused), state.get("momentum_buffer", unused))
        for ps, gs, vs, avgs, bs in buckets.values():
            if weight_decay != 0:
                if group["decoupled_decay"]:
                    torch._foreach_add_(ps, ps, alpha=-weight_decay)
                else:
                    gs = torch._foreach_add(gs, ps, alpha=weight_decay)

            # TensorFlow's order of ops: v += (1 - alpha) * (g^2 - v).
            increments = torch._foreach_mul(gs, gs)
            torch._foreach_sub_(increments, vs)
            torch._foreach_add_(vs, increments, alpha=one_minus_alpha)
            if centered:
                increments = torch._foreach_sub(gs, avgs)
                torch._foreach_add_(avgs, increments, alpha=one_minus_alpha)
                denominators = torch._foreach_addcmul(vs, avgs, avgs, value=-1)
                torch._foreach_add_(denominators, eps)
            else:
                denominators = torch._foreach_add(vs, eps)
            torch._foreach_sqrt_(denominators)

            if momentum > 0:
                torch._foreach_mul_(bs, momentum)
                if group["lr_in_momentum"]:
                    torch._foreach_addcdiv_(bs, gs, denominators, value=lr)
                    torch._foreach_sub_(ps, bs)
                else:
                    torch._foreach_addcdiv_(bs, gs, denominators)
                    torch._foreach_add_(ps, bs, alpha=-lr)
            else:
                torch._foreach_addcdiv_(ps, gs, denominators, value=-lr)
