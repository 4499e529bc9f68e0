"""NpuFusedBertAdam: the Adam of the original BERT code, with its warmup schedules, multi-tensor."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List

import torch
from torch import Tensor
from torch.optim.optimizer import ParamsT, required

from ._tensor_lists import ADAM_STATE, adam_directions, group_by_device_and_dtype, update_moments_
from ._validation import LR, WEIGHT_DECAY, Rule, fraction, non_negative
from .npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedBertAdam"]

WARMUP_DEFAULT = 0.002
DEGREE_DEFAULT = 0.5


def _warmup_cosine(x: float, warmup: float = WARMUP_DEFAULT) -> float:
    """Linear warmup, then half a cosine period: 1 at x=0, 0 at x=1."""
    if x < warmup:
        return x / warmup
    return 0.5 * (1.0 + math.cos(math.pi * x))


def _warmup_constant(x: float, warmup: float = WARMUP_DEFAULT) -> float:
    """Linear warmup, then 1."""
    if x < warmup:
        return x / warmup
    return 1.0


def _warmup_linear(x: float, warmup: float = WARMUP_DEFAULT) -> float:
    """Linear warmup to 1 at x=warmup, then linear decay to 0 at x=1 (and 0 after)."""
    if x < warmup:
        return x / warmup
    return max((x - 1.0) / (warmup - 1.0), 0.0)


def _warmup_poly(x: float, warmup: float = WARMUP_DEFAULT, degree: float = DEGREE_DEFAULT) -> float:
    """Linear warmup, then ``(1 - x) ** degree`` (0 once training runs past t_total)."""
    if x < warmup:
        return x / warmup
    # Past t_total, 1 - x < 0 would make a complex number out of ** 0.5.
    return max(1.0 - x, 0.0) ** degree


#: The learning-rate multipliers, as functions of the progress
#: ``step / t_total`` and of ``warmup``, by schedule name.
SCHEDULES: Dict[str, Callable[..., float]] = {
    "warmup_cosine": _warmup_cosine,
    "warmup_constant": _warmup_constant,
    "warmup_linear": _warmup_linear,
    "warmup_poly": _warmup_poly,
}


class NpuFusedBertAdam(NpuFusedOptimizerBase):
    """The Adam variant of Google's BERT (and of pytorch-pretrained-BERT).

    For each parameter ``p`` with gradient ``g``, at its step ``t`` (0 first)::

        g = g * min(1, max_grad_norm / (||g|| + 1e-6))   (in place on p.grad; skipped if max_grad_norm <= 0)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        u = m / (sqrt(v) + e) + weight_decay * p       (no bias correction)
        p -= lr * schedule(t / t_total, warmup) * u     (schedule = 1 if t_total == -1)

    The gradient clipping is per parameter tensor (its own L2 norm, in
    float32). The elementwise ops run as multi-tensor ops over a param
    group; the state (``step``, ``exp_avg``, ``exp_avg_sq``) is kept per
    parameter, in its dtype.

    Args:
        params: the parameters to optimize, or dicts defining param groups.
        lr: learning rate (required).
        warmup: the share of ``t_total`` spent warming up, in [0, 1); -1 for
            no warmup (default: -1).
        t_total: the total number of training steps of the schedule; -1 for
            a constant learning rate (default: -1).
        schedule: ``"warmup_linear"`` (default), ``"warmup_cosine"``,
            ``"warmup_constant"`` or ``"warmup_poly"``.
        b1: Adam's beta1 (default: 0.9).
        b2: Adam's beta2 (default: 0.999).
        e: Adam's epsilon (default: 1e-6).
        weight_decay: weight decay added to the update (default: 0.01).
        max_grad_norm: the largest L2 norm of each parameter's gradient; -1
            (or any value <= 0) for no clipping (default: 1.0).

    Raises:
        ValueError: a hyper-parameter is out of range.
    """

    _hyper_parameter_rules = (
        LR,
        fraction("warmup", "warmup", one_allowed=False, label="warmup (or -1 for no warmup)", off=(-1,)),
        Rule("schedule", lambda schedule: schedule in SCHEDULES,
             "Invalid schedule parameter: {value!r}. {owner} knows " + ", ".join(sorted(SCHEDULES)) + "."),
        Rule("t_total", lambda t_total: t_total == -1 or t_total > 0,
             "Invalid t_total: {value!r}. {owner} needs the number of training steps (> 0), "
             "or -1 for a constant learning rate."),
        fraction("b1", "b1 parameter", one_allowed=False),
        fraction("b2", "b2 parameter", one_allowed=False),
        non_negative("e", "epsilon value"),
        WEIGHT_DECAY,
    )

    def __init__(
        self,
        params: ParamsT,
        lr: float = required,
        warmup: float = -1,
        t_total: int = -1,
        schedule: str = "warmup_linear",
        b1: float = 0.9,
        b2: float = 0.999,
        e: float = 1e-6,
        weight_decay: float = 0.01,
        max_grad_norm: float = 1.0,
    ) -> None:
        defaults = dict(lr=lr, schedule=schedule, warmup=warmup, t_total=t_total, b1=b1, b2=b2,
                        e=e, weight_decay=weight_decay, max_grad_norm=max_grad_norm)
        self.max_grad_norm = max_grad_norm
        super().__init__(params, defaults)

    def __getstate__(self) -> Dict[str, Any]:
        # torch.optim pickles only defaults, state and param_groups; keep
        # torch_npu's attribute too (the groups' max_grad_norm is what is used).
        state = super().__getstate__()
        state["max_grad_norm"] = self.max_grad_norm
        return state

    @staticmethod
    def _scheduled_lr(group: Dict[str, Any], step: float) -> float:
        if group["t_total"] == -1:
            return group["lr"]
        schedule = SCHEDULES[group["schedule"]]
        return group["lr"] * schedule(step / group["t_total"], group["warmup"])

    def _step_group(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor]) -> None:
        state = self._state_lists(params, ADAM_STATE)
        # The schedule is read at the step count before this step (0 first).
        lrs = [self._scheduled_lr(group, step.item()) for step in state["step"]]
        torch._foreach_add_(state["step"], 1)

        b1, b2, e = group["b1"], group["b2"], group["e"]
        weight_decay, max_grad_norm = group["weight_decay"], group["max_grad_norm"]
        buckets = group_by_device_and_dtype(params, grads, state["exp_avg"], state["exp_avg_sq"], lrs)
        for ps, gs, ms, vs, bucket_lrs in buckets.values():
            if max_grad_norm > 0:
                norms = torch.stack(torch._foreach_norm(gs, 2, dtype=torch.float32))
                coefficients = (max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
                torch._foreach_mul_(gs, list(coefficients.unbind()))
            update_moments_(ms, vs, gs, b1, b2)
            updates = adam_directions(ms, vs, e)
            if weight_decay > 0:
                torch._foreach_add_(updates, ps, alpha=weight_decay)
            torch._foreach_mul_(updates, bucket_lrs)
            torch._foreach_sub_(ps, updates)
