"""NpuFusedAdamP: AdamP (Adam with projection of scale-invariant weights), multi-tensor."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Tuple

import torch
from torch import Tensor
from torch.optim.optimizer import ParamsT

from ._tensor_lists import ADAM_STATE, group_by_device_and_dtype, update_moments_
from ._validation import BETAS, EPS, LR, WEIGHT_DECAY, non_negative
from .npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedAdamP"]


def _channel_view(x: Tensor) -> Tensor:
    """One row per output channel (first dimension)."""
    return x.reshape(x.size(0), -1)


def _layer_view(x: Tensor) -> Tensor:
    """The whole tensor as one row."""
    return x.reshape(1, -1)


class NpuFusedAdamP(NpuFusedOptimizerBase):
    """AdamP, from `AdamP: Slowing Down the Slowdown for Momentum Optimizers on Scale-invariant Weights`.

    Adam (with bias correction) whose update of a scale-invariant weight
    (one followed by a normalization layer) is projected onto the tangent
    space of the weight, which keeps the update from only growing the
    weight's norm. For each parameter ``p`` with gradient ``g`` at step ``t``::

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        d = sqrt(v) / sqrt(1 - beta2 ** t) + eps
        u = (beta1 * m + (1 - beta1) * g) / d   if nesterov else   m / d
        r = 1
        if p.dim() > 1:  for each view (per output channel, then whole tensor):
            if max over rows of |cos(g, p)| < delta / sqrt(row length):
                u -= p_n * rowsum(p_n * u) with p_n = p / (rownorm(p) + eps);  r = wd_ratio;  stop
        p *= 1 - lr * weight_decay * r                  (if weight_decay > 0)
        p -= lr / (1 - beta1 ** t) * u

    The Adam parts run as multi-tensor ops over a param group; the
    projection is decided per tensor (in float32), with one host round trip
    per view for the whole group. The state (``step``, ``exp_avg``,
    ``exp_avg_sq``) is kept per parameter, in its dtype.

    Args:
        params: the parameters to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-3).
        betas: coefficients of the running averages of the gradient and of
            its square (default: (0.9, 0.999)).
        eps: added to the denominator for numerical stability (default: 1e-8).
        weight_decay: decoupled weight decay (default: 0).
        delta: cosine-similarity threshold under which a weight counts as
            scale-invariant (default: 0.1).
        wd_ratio: weight-decay multiplier of projected weights (default: 0.1).
        nesterov: use Nesterov momentum (default: False).

    Raises:
        ValueError: a hyper-parameter is out of range.
    """

    _hyper_parameter_rules = (
        LR, BETAS, EPS, WEIGHT_DECAY, non_negative("delta", "delta value"), non_negative("wd_ratio", "wd_ratio value"))

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        delta: float = 0.1,
        wd_ratio: float = 0.1,
        nesterov: bool = False,
    ) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        delta=delta, wd_ratio=wd_ratio, nesterov=nesterov)
        super().__init__(params, defaults)

    def _step_group(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor]) -> None:
        state = self._state_lists(params, ADAM_STATE)
        torch._foreach_add_(state["step"], 1)

        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        step_counts = [step.item() for step in state["step"]]
        bias_correction2_sqrts = [math.sqrt(1 - beta2 ** t) for t in step_counts]
        neg_step_sizes = [-lr / (1 - beta1 ** t) for t in step_counts]
        buckets = group_by_device_and_dtype(
            params, grads, state["exp_avg"], state["exp_avg_sq"], bias_correction2_sqrts, neg_step_sizes)
        for ps, gs, ms, vs, bc2_sqrts, bucket_neg_step_sizes in buckets.values():
            update_moments_(ms, vs, gs, beta1, beta2)
            denominators = torch._foreach_sqrt(vs)
            torch._foreach_div_(denominators, bc2_sqrts)
            torch._foreach_add_(denominators, eps)

            if group["nesterov"]:
                perturbs = torch._foreach_mul(ms, beta1)
                torch._foreach_add_(perturbs, gs, alpha=1 - beta1)
                torch._foreach_div_(perturbs, denominators)
            else:
                perturbs = torch._foreach_div(ms, denominators)

            ratios = self._project(ps, gs, perturbs, group["delta"], group["wd_ratio"], eps)
            if weight_decay > 0:
                torch._foreach_mul_(ps, [1 - lr * weight_decay * ratio for ratio in ratios])
            torch._foreach_mul_(perturbs, bucket_neg_step_sizes)
            torch._foreach_add_(ps, perturbs)

    @staticmethod
    def _project(params: List[Tensor], grads: List[Tensor], perturbs: List[Tensor],
                 delta: float, wd_ratio: float, eps: float) -> List[float]:
        """Projects the updates of scale-invariant weights in place; returns each weight-decay ratio."""
        ratios = [1.0] * len(params)
        # Vectors and scalars (biases, norm weights) are never projected.
        undecided = [i for i, p in enumerate(params) if p.dim() > 1]
        views: Tuple[Callable[[Tensor], Tensor], ...] = (_channel_view, _layer_view)
        for view in views:
            if not undecided:
                break
            invariant = []
            for i in undecided:
                p, g = view(params[i].float()), view(grads[i].float())
                cosine = (p * g).sum(dim=1).abs() / (g.norm(dim=1) + eps) / (p.norm(dim=1) + eps)
                invariant.append(cosine.max() < delta / math.sqrt(p.size(1)))
            # One host round trip for all tensors of this view.
            decisions = torch.stack(invariant).tolist()
            still_undecided = []
            for i, is_invariant in zip(undecided, decisions):
                if not is_invariant:
                    still_undecided.append(i)
                    continue
                p = params[i].float()
                expand = [-1] + [1] * (p.dim() - 1)
                unit = p / view(p).norm(dim=1).add(eps).view(expand)
                update = perturbs[i].float()
                update = update - unit * view(unit * update).sum(dim=1).view(expand)
                perturbs[i].copy_(update)
                ratios[i] = wd_ratio
            undecided = still_undecided
        return ratios
