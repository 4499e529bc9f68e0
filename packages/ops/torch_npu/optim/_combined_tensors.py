"""Flat ("combined") tensors that are the memory of many parameters or gradients.

torch_npu's fused optimizers expose one flat tensor per dtype holding every
parameter (and one holding every gradient), so that code such as loss
scaling or gradient clipping can treat the whole model as a single tensor.
That only works if the flat tensor *is* the parameters' memory, not a copy
of it: here each parameter (gradient) is re-pointed to a slice of the flat
tensor, so an in-place op on either side is seen by the other.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence

import torch
from torch import Tensor

__all__: list = []

#: One flat tensor per dtype, in this order: indices 0 and 1 are float32 and
#: float16 as in torch_npu; bfloat16 (which torch_npu's versions reject) is 2.
COMBINED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class CombinedTensors:
    """Keeps one flat tensor per dtype whose slices are the members' tensors.

    ``read(p)`` gives the tensor of parameter ``p`` that is combined (``p``
    itself or ``p.grad``); ``write(p, view)`` makes that tensor ``view``.
    """

    def __init__(self, what: str, read: Callable[[Tensor], Tensor], write: Callable[[Tensor, Tensor], None]):
        self._what = what
        self._read = read
        self._write = write
        self._flat: List[Optional[Tensor]] = [None] * len(COMBINED_DTYPES)
        self._members: List[List[Tensor]] = [[] for _ in COMBINED_DTYPES]

    @torch.no_grad()
    def get(self, params: Sequence[Tensor]) -> List[Optional[Tensor]]:
        """The flat tensors of ``params`` (``None`` for a dtype none of them has).

        The flat tensors are built (and the members re-pointed into them) on
        the first call, and again whenever a member's tensor stopped being
        its slice: a gradient set to ``None`` and recreated by ``backward``,
        a tensor assigned by the user, or a different set of ``params``.
        """
        tensors = [self._read(p) for p in params]
        devices = {t.device for t in tensors}
        if len(devices) > 1:
            raise RuntimeError(
                f"Cannot combine the {self._what} into flat tensors: they are on several devices "
                f"({', '.join(sorted(str(d) for d in devices))}). Keep all parameters of the "
                "optimizer on one device to use get_combined_params()/get_combined_grads()."
            )
        for t in tensors:
            if t.dtype not in COMBINED_DTYPES:
                raise TypeError(
                    f"Cannot combine the {self._what} into flat tensors: one has dtype {t.dtype}, "
                    "but only float32, float16 and bfloat16 are combined. Convert the parameter "
                    "(e.g. model.float()) or do not use get_combined_params()/get_combined_grads()."
                )
        for index, dtype in enumerate(COMBINED_DTYPES):
            members = [p for p, t in zip(params, tensors) if t.dtype == dtype]
            if not members:
                self._flat[index], self._members[index] = None, []
            elif not self._still_combined(index, members):
                self._combine(index, members)
        return list(self._flat)

    def _still_combined(self, index: int, members: List[Tensor]) -> bool:
        flat = self._flat[index]
        old = self._members[index]
        if flat is None or len(old) != len(members) or any(a is not b for a, b in zip(old, members)):
            return False
        storage = flat.untyped_storage().data_ptr()
        offset = flat.storage_offset()
        for p in members:
            t = self._read(p)
            if (t.untyped_storage().data_ptr() != storage or t.storage_offset() != offset
                    or not t.is_contiguous()):
                return False
            offset += t.numel()
        return True

    def _combine(self, index: int, members: List[Tensor]) -> None:
        tensors = [self._read(p) for p in members]
        # One copy kernel for all members instead of one per member.
        flat = torch.cat([t.detach().reshape(-1) for t in tensors])
        offset = 0
        for p, t in zip(members, tensors):
            self._write(p, flat[offset:offset + t.numel()].view(t.shape))
            offset += t.numel()
        self._flat[index], self._members[index] = flat, members


def _set_param_memory(p: Tensor, view: Tensor) -> None:
    # ``.data`` keeps the Parameter object (and so the optimizer state and the
    # module attributes that refer to it) and only changes its memory.
    p.data = view


def _set_grad_memory(p: Tensor, view: Tensor) -> None:
    # ``backward`` accumulates into an existing ``.grad`` in place, so later
    # gradients land in the flat tensor too.
    p.grad = view


def combined_params() -> CombinedTensors:
    """Combines the parameters themselves."""
    return CombinedTensors("parameters", lambda p: p, _set_param_memory)


def combined_grads() -> CombinedTensors:
    """Combines the parameters' ``.grad``."""
    return CombinedTensors("gradients", lambda p: p.grad, _set_grad_memory)
