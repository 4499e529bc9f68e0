"""torch.npu.amp: automatic mixed precision on npu (also ``torch_npu.npu.amp``).

The npu counterpart of ``torch.cuda.amp``, for code written for Ascend's
torch_npu::

    scaler = torch.npu.amp.GradScaler()
    with torch.npu.amp.autocast():
        loss = model(x)
    scaler.scale(loss).backward()

New code should use the device-generic API, which is what these names wrap:
``torch.autocast("npu", dtype=torch.float16 | torch.bfloat16)``,
``torch.amp.GradScaler("npu")`` and
``torch.amp.custom_fwd/custom_bwd(device_type="npu")``.

The module belongs to torch-npu-ops (which provides the autocast kernels);
its plugin initialiser makes it reachable as ``torch.npu.amp``.
"""

from __future__ import annotations

from typing import List

import torch

from . import autocast_mode as autocast_mode, grad_scaler as grad_scaler  # aliased in sys.modules
from .autocast_mode import autocast, custom_bwd, custom_fwd
from .grad_scaler import GradScaler

#: The lower-precision dtypes the autocast kernels of torch-npu-ops handle;
#: reported by ``torch.npu.get_amp_supported_dtype()``.
SUPPORTED_DTYPES: List[torch.dtype] = [torch.float16, torch.bfloat16]

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]
