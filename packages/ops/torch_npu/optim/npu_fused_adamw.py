"""NpuFusedAdamW: torch.optim.AdamW (decoupled weight decay), multi-tensor."""

from __future__ import annotations

from typing import Tuple

from torch.optim.adamw import adamw
from torch.optim.optimizer import ParamsT

from .npu_fused_adam import NpuFusedAdam

__all__ = ["NpuFusedAdamW"]


class NpuFusedAdamW(NpuFusedAdam):
    """AdamW: Adam with decoupled weight decay (``p -= lr * weight_decay * p``).

    Exactly :class:`torch.optim.AdamW` (same state, same results) run with
    ``foreach=True``: multi-tensor ops over a whole param group.
    It is what HuggingFace Trainer's ``optim="adamw_torch_npu_fused"`` uses.
    Like torch.optim.AdamW derives from torch.optim.Adam, this class derives
    from :class:`NpuFusedAdam`.

    Args:
        params: the parameters to optimize, or dicts defining param groups.
        lr: learning rate (default: 1e-3).
        betas: coefficients of the running averages of the gradient and of
            its square (default: (0.9, 0.999)).
        eps: added to the denominator for numerical stability (default: 1e-8).
        weight_decay: decoupled weight decay coefficient (default: 1e-2).
        amsgrad: use the AMSGrad variant (default: False).

    Raises:
        ValueError: a hyper-parameter is out of range.
    """

    _update = staticmethod(adamw)

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
    ) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)
