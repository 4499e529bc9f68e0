"""``torch.npu.amp.GradScaler``: ``torch.amp.GradScaler("npu")`` under the
name Ascend's torch_npu uses.

The scaler's device work (``_amp_foreach_non_finite_check_and_unscale_``,
``_amp_update_scale_``) runs asynchronously on npu; as on CUDA, the host
waits once per optimizer step, to learn whether the step must be skipped
(unless the optimizer consumes ``found_inf`` itself, e.g. fused Adam).
"""

from __future__ import annotations

import torch

__all__ = ["GradScaler"]


class GradScaler(torch.amp.GradScaler):
    """See :class:`torch.amp.GradScaler`; this one always scales for npu.

    torch_npu's own API (accelerate creates it for npu), so, unlike
    ``torch.cuda.amp.GradScaler``, it is not deprecated and does not warn.
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        super().__init__(
            "npu",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )
