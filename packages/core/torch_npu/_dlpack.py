"""DLPack export of npu tensors (``torch.from_dlpack``, ``Tensor.__dlpack_device__``).

torch's C++ exporter already tags a PrivateUse1 tensor's capsule with
``kDLExtDev``, but ``Tensor.__dlpack_device__`` (torch/_tensor.py, 2.13)
recognises that backend only by the literal type name ``"privateuse1"``,
which a renamed backend never has: every npu tensor was refused with
"Unknown device type npu for Dlpack", so ``torch.from_dlpack(npu_tensor)``
failed although ``torch.utils.dlpack.to_dlpack`` worked. We answer for npu
tensors what the capsule says and leave every other device to torch.
"""

from __future__ import annotations

import functools

import torch


def register() -> None:
    original = torch.Tensor.__dlpack_device__
    if getattr(original, "_torch_npu_wrapped", False):
        return

    @functools.wraps(original)
    def __dlpack_device__(self):  # noqa: N807  (the protocol's name)
        # Subclasses with a __torch_function__ go to torch, which dispatches them.
        if self.device.type == "npu" and not torch.overrides.has_torch_function_unary(self):
            from torch.utils.dlpack import DLDeviceType

            index = self.device.index if self.device.index is not None else 0
            return (DLDeviceType.kDLExtDev, index)
        return original(self)

    __dlpack_device__._torch_npu_wrapped = True
    torch.Tensor.__dlpack_device__ = __dlpack_device__
