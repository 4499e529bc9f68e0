"""torch_npu.distributed: collective communication between npu devices (the torch-npu-distributed plugin).

Provides the ``hccl`` backend of :mod:`torch.distributed`, as Ascend's
torch_npu does::

    import torch, torch_npu
    import torch.distributed as dist

    dist.init_process_group("hccl")        # or init_process_group() for npu tensors
    torch.npu.set_device(dist.get_rank())
    t = torch.ones(4).npu()
    dist.all_reduce(t)

ProcessGroupHCCL runs each collective as device work on a communicator
stream of the tensors' device, asynchronously to the host, through HCCL's C
API: CANN's libhccl where CANN is installed, otherwise the embedded
simulator's HCCL, which joins the processes of one machine through shared
memory. This release has broadcast, all_reduce, reduce, all_gather (list and
tensor forms, coalesced), reduce_scatter (list and tensor forms, coalesced),
all_to_all (single, even and uneven, and lists), send/recv and
batch_isend_irecv, gather, scatter and barrier (see README.md).

Loaded by torch_npu at import through the ``torch_npu.plugins`` entry point.
"""

from __future__ import annotations

from datetime import timedelta
from types import ModuleType

import torch.distributed as dist

from torch_npu._plugins import check_plugin_build

from . import _build_info

__version__ = "0.1.0"

# Before the extension loads: built for another core or torch, it would fail
# with undefined symbols, or misbehave.
check_plugin_build("torch-npu-distributed", __version__, _build_info.BUILT_WITH_CORE,
                   _build_info.BUILT_WITH_TORCH)

from ._C import ProcessGroupHCCL  # noqa: E402

__all__ = ["ProcessGroupHCCL", "__version__", "is_hccl_available"]

BACKEND_NAME = "hccl"


def is_hccl_available() -> bool:
    """True: the ``hccl`` backend is registered with torch.distributed (as
    ``torch.distributed.is_hccl_available()`` in Ascend's torch_npu)."""
    return BACKEND_NAME in dist.Backend.backend_list


def _create_process_group_hccl(store: dist.Store, rank: int, size: int,
                               timeout: timedelta) -> ProcessGroupHCCL:
    """torch.distributed's constructor hook for ``init_process_group("hccl")``
    and ``new_group(backend="hccl")``."""
    return ProcessGroupHCCL(store, rank, size, timeout)


def _initialize_plugin(torch_npu: ModuleType) -> None:
    """Entry point of the ``torch_npu.plugins`` group: registers the hccl backend."""
    if not dist.is_available() or BACKEND_NAME in dist.Backend.backend_list:
        return
    # devices=["npu"]: hccl becomes npu's default backend, so that
    # init_process_group() without a backend uses it for npu tensors.
    dist.Backend.register_backend(BACKEND_NAME, _create_process_group_hccl, devices=["npu"])
    dist.is_hccl_available = is_hccl_available
