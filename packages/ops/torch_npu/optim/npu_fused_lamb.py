"""NpuFusedLamb: LAMB (layer-wise adaptive moments), multi-tensor."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor
from torch.optim.optimizer import ParamsT

from ._tensor_lists import ADAM_STATE, adam_directions, group_by_device_and_dtype, update_moments_
from ._validation import BETAS, EPS, LR, WEIGHT_DECAY
from .npu_fused_optim_base import NpuFusedOptimizerBase

__all__ = ["NpuFusedLamb"]

#: The parameter norm in the trust ratio is clamped to this (as in the
#: reference LAMB implementation torch_npu follows).
_MAX_WEIGHT_NORM = 10.0


class NpuFusedLamb(NpuFusedOptimizerBase):
    """LAMB, from `Large Batch Optimization for Deep Learning: Training BERT in 76 minutes`.

    For each parameter ``p`` with gradient ``g`` (no bias correction, as in
    the paper's v3 and torch_npu)::

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        u = m / (sqrt(v) + eps) + weight_decay * p
        trust_ratio = min(||p||, 10) / ||u||   (1 if either norm is 0, or with adam=True)
        p -= lr * trust_ratio * u

    The norms are per parameter tensor and computed in float32. With
    ``use_global_grad_norm`` the gradients are first divided by the global
    L2 norm of all gradients of the optimizer when it exceeds 1 (``p.grad``
    itself is not changed). The elementwise ops run as multi-tensor ops over
    a param group; the state (``step``, ``exp_avg``, ``exp_avg_sq``) is kept
    per parameter, in its dtype.

    Args:
        params: the parameters to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-3).
        betas: coefficients of the running averages of the gradient and of
            its square (default: (0.9, 0.999)).
        eps: added to the denominator for numerical stability (default: 1e-6).
        weight_decay: weight decay added to the update (default: 0).
        adam: always use a trust ratio of 1, which makes this Adam without
            bias correction; for comparisons (default: False).
        use_global_grad_norm: scale the gradients down to a global norm of
            at most 1 first (default: False).

    Raises:
        ValueError: a hyper-parameter is out of range.
    """

    _hyper_parameter_rules = (LR, BETAS, EPS, WEIGHT_DECAY)

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0,
        adam: bool = False,
        use_global_grad_norm: bool = False,
    ) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        self.adam = adam
        self.use_global_grad_norm = use_global_grad_norm
        super().__init__(params, defaults)

    def __getstate__(self) -> Dict[str, Any]:
        # torch.optim pickles (and deep-copies) only defaults, state and
        # param_groups; these two options live on the optimizer itself.
        state = super().__getstate__()
        state.update(adam=self.adam, use_global_grad_norm=self.use_global_grad_norm)
        return state

    def _step_groups(self) -> None:
        # The global norm spans every group, so it is taken before any group
        # changes its parameters.
        divisor = self._global_grad_norm_divisor() if self.use_global_grad_norm else None
        for group, params, grads in self._groups_with_grads():
            self._step_group(group, params, grads, divisor)

    def _global_grad_norm_divisor(self) -> Optional[Tensor]:
        """max(1, L2 norm of all gradients), as a float32 0-dim tensor; None without gradients."""
        grads = [p.grad for p in self._all_params_with_grads()]
        if not grads:
            return None
        device = grads[0].device
        norms = []
        for (same_kind,) in group_by_device_and_dtype(grads).values():
            norms.extend(n.to(device) for n in torch._foreach_norm(same_kind, 2, dtype=torch.float32))
        # Dividing by 1 changes nothing, so clamping replaces a host-side
        # "if norm > 1" (which would wait for the device).
        return torch.linalg.vector_norm(torch.stack(norms)).clamp(min=1.0)

    def _step_group(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor],
                    divisor: Optional[Tensor] = None) -> None:
        state = self._state_lists(params, ADAM_STATE)
        torch._foreach_add_(state["step"], 1)

        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        buckets = group_by_device_and_dtype(params, grads, state["exp_avg"], state["exp_avg_sq"])
        for (device, _), (ps, gs, ms, vs) in buckets.items():
            if divisor is not None:
                gs = torch._foreach_div(gs, divisor.to(device))
            update_moments_(ms, vs, gs, beta1, beta2)
            updates = adam_directions(ms, vs, eps)
            if weight_decay != 0:
                torch._foreach_add_(updates, ps, alpha=weight_decay)

            if not self.adam:
                torch._foreach_mul_(updates, self._trust_ratios(ps, updates))
            torch._foreach_add_(ps, updates, alpha=-lr)

    @staticmethod
    def _trust_ratios(params: List[Tensor], updates: List[Tensor]) -> List[Tensor]:
        """Per parameter ``min(||p||, 10) / ||u||`` (1 if a norm is 0), as 0-dim tensors on the device.

        Computed for the whole list at once and kept on the device: no host
        round trip per parameter.
        """
        weight_norms = torch.stack(torch._foreach_norm(params, 2, dtype=torch.float32))
        weight_norms = weight_norms.clamp(0, _MAX_WEIGHT_NORM)
        update_norms = torch.stack(torch._foreach_norm(updates, 2, dtype=torch.float32))
        degenerate = (weight_norms == 0) | (update_norms == 0)
        ratios = torch.where(degenerate, torch.ones_like(weight_norms), weight_norms / update_norms)
        return list(ratios.unbind())
