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
batch_isend_irecv, gather, scatter and barrier, and torch_npu's
:func:`all_gather_into_tensor_uneven` and :func:`reduce_scatter_tensor_uneven`
(see README.md).

Loaded by torch_npu at import through the ``torch_npu.plugins`` entry point.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import timedelta
from types import ModuleType

import torch
import torch.distributed as dist

from torch_npu._plugins import check_plugin_build

from . import _build_info

__version__ = "0.1.0"

# Before the extension loads: built for another core or torch, it would fail
# with undefined symbols, or misbehave.
check_plugin_build("torch-npu-distributed", __version__, _build_info.BUILT_WITH_CORE,
                   _build_info.BUILT_WITH_TORCH)

from ._C import ProcessGroupHCCL  # noqa: E402

__all__ = [
    "ProcessGroupHCCL",
    "__version__",
    "all_gather_into_tensor_uneven",
    "all_to_all_vc",
    "cmake_prefix_path",
    "is_hccl_available",
    "reduce_scatter_tensor_uneven",
    "reinit_process_group",
]

BACKEND_NAME = "hccl"

#: The CMAKE_PREFIX_PATH entry of this package's CMake package, for C++
#: programs that use ProcessGroupHCCL: ``find_package(TorchNPUDistributed)``
#: gives the target ``torch_npu::torch_npu_distributed`` (see README.md).
cmake_prefix_path: str = os.path.join(os.path.dirname(__file__), "share", "cmake")


def is_hccl_available() -> bool:
    """True: the ``hccl`` backend is registered with torch.distributed (as
    ``torch.distributed.is_hccl_available()`` in Ascend's torch_npu)."""
    return BACKEND_NAME in dist.Backend.backend_list


def _hccl_backend(group: dist.ProcessGroup | None, tensor: torch.Tensor,
                  api: str) -> ProcessGroupHCCL | None:
    """The hccl backend of `group` (the default group if None) for `tensor`'s
    device; None if this rank is not in the group."""
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    if dist.distributed_c10d._rank_not_in_group(group):
        return None
    backend = group._get_backend(tensor.device)
    if not isinstance(backend, ProcessGroupHCCL):
        raise TypeError(f"torch_npu.distributed.{api} needs a group with the hccl backend for "
                        f"{tensor.device} tensors, got {type(backend).__name__}")
    return backend


def _finish(work: dist.Work, async_op: bool) -> dist.Work | None:
    if async_op:
        return work
    work.wait()
    return None


def all_gather_into_tensor_uneven(output: torch.Tensor, input: torch.Tensor,
                                  output_split_sizes: Sequence[int] | None = None,
                                  group: dist.ProcessGroup | None = None,
                                  async_op: bool = False) -> dist.Work | None:
    """:func:`torch.distributed.all_gather_into_tensor` with pieces of different
    sizes, as torch_npu's ``torch_npu.distributed.all_gather_into_tensor_uneven``.

    Rank ``r``'s ``input`` fills ``output_split_sizes[r]`` rows (dim 0) of
    ``output``, in rank order; the inputs' other dimensions match
    ``output``'s. ``output_split_sizes`` has one entry per rank of ``group``
    and adds up to ``output.size(0)``; None splits ``output`` evenly. Returns
    the work if ``async_op``, else waits (the current stream does) and
    returns None.
    """
    backend = _hccl_backend(group, input, "all_gather_into_tensor_uneven")
    if backend is None:
        return None
    work = backend.all_gather_into_tensor_uneven(output, input, list(output_split_sizes or []))
    return _finish(work, async_op)


def reduce_scatter_tensor_uneven(output: torch.Tensor, input: torch.Tensor,
                                 input_split_sizes: Sequence[int] | None = None,
                                 op: dist.ReduceOp | dist.ReduceOp.RedOpType = dist.ReduceOp.SUM,
                                 group: dist.ProcessGroup | None = None,
                                 async_op: bool = False) -> dist.Work | None:
    """:func:`torch.distributed.reduce_scatter_tensor` with pieces of different
    sizes, as torch_npu's ``torch_npu.distributed.reduce_scatter_tensor_uneven``.

    ``input`` (the same shape on every rank) is split along dim 0 into
    ``input_split_sizes`` rows, one piece per rank of ``group``; rank ``r``'s
    ``output`` receives the reduction by ``op`` of every rank's piece ``r``.
    None splits ``input`` evenly. Ranks that disagree on the split sizes fail
    on the device, naming both sides. Returns the work if ``async_op``, else
    waits (the current stream does) and returns None.
    """
    backend = _hccl_backend(group, input, "reduce_scatter_tensor_uneven")
    if backend is None:
        return None
    if not isinstance(op, dist.ReduceOp):  # a RedOpType; PREMUL_SUM comes as a ReduceOp
        op = dist.ReduceOp(op)
    work = backend.reduce_scatter_tensor_uneven(output, input, list(input_split_sizes or []), op)
    return _finish(work, async_op)


def all_to_all_vc(output: torch.Tensor, input: torch.Tensor,
                  send_count_matrix: Sequence[Sequence[int]],
                  group: dist.ProcessGroup | None = None,
                  async_op: bool = False) -> dist.Work | None:
    """All-to-all with per-pair element counts, as torch_npu's
    ``torch_npu.distributed.all_to_all_vc`` (HCCL's HcclAlltoAllVC).

    ``send_count_matrix[i][j]`` is the number of elements rank ``i`` sends to
    rank ``j``; every rank passes the same matrix. ``input`` holds this rank's
    pieces for ranks 0, 1, ... one after the other (row ``rank`` of the
    matrix adds up to its element count), and ``output`` receives the pieces
    from ranks 0, 1, ... the same way (column ``rank``). Both are contiguous
    npu tensors of one dtype, of any shape, and must not overlap. Returns
    the work if ``async_op``, else waits (the current stream does) and
    returns None.
    """
    backend = _hccl_backend(group, input, "all_to_all_vc")
    if backend is None:
        return None
    size, rank = backend.size(), backend.rank()
    matrix = [list(row) for row in send_count_matrix]
    if len(matrix) != size or any(len(row) != size for row in matrix):
        raise ValueError(f"all_to_all_vc: send_count_matrix must be {size} x {size} (the group's "
                         f"size), got {len(matrix)} rows of {[len(row) for row in matrix]} counts")
    if any(not isinstance(n, int) or n < 0 for row in matrix for n in row):
        raise ValueError("all_to_all_vc: send_count_matrix must hold non-negative integers")
    sends, receives = matrix[rank], [row[rank] for row in matrix]
    for name, tensor, counts, what in (("input", input, sends, "row"), ("output", output, receives, "column")):
        if tensor.device.type != "npu" or not tensor.is_contiguous():
            raise ValueError(f"all_to_all_vc: {name} must be a contiguous npu tensor, got "
                             f"{'a non-contiguous' if tensor.device.type == 'npu' else 'a ' + tensor.device.type} tensor")
        if tensor.numel() != sum(counts):
            raise ValueError(f"all_to_all_vc: {name} has {tensor.numel()} elements, but {what} {rank} of "
                             f"send_count_matrix (rank {rank}'s) adds up to {sum(counts)}")
    if input.dtype != output.dtype:
        raise ValueError(f"all_to_all_vc: input and output must have one dtype, got {input.dtype} and "
                         f"{output.dtype}")
    # As elements of flat views, the counts are the split sizes of an
    # uneven all-to-all (HcclAlltoAllV, whose peers check each other's counts).
    work = backend.alltoall_base(output.view(-1), input.view(-1), receives, sends, dist.AllToAllOptions())
    return _finish(work, async_op)


def reinit_process_group(group: dist.ProcessGroup | None = None,
                         rebuild_link: bool = True) -> dist.ProcessGroup | None:
    """Recovers a process group whose hccl communicators failed, without
    destroying it, as torch_npu's ``torch.distributed.reinit_process_group``
    (Note [Rebuilding a group's communicators], csrc/ProcessGroupHCCL.h).

    With ``rebuild_link`` (the default), every rank of ``group`` (the default
    group if None) calls it at the same point: each destroys its
    communicators of the group, once its queued collectives have ended or
    failed, and the next collective creates new ones. Returns the group.
    Without it, the communicators of every group on the current device are
    kept, and a failed one raises (it cannot be resumed); returns None.
    """
    if not rebuild_link:
        device = torch.npu.current_device()
        for pg in list(dist.distributed_c10d._world.pg_map):
            try:
                backend = pg._get_backend(torch.device("npu"))
            except RuntimeError:  # the group has no backend for npu
                continue
            if isinstance(backend, ProcessGroupHCCL):
                backend._check_communicator_usable(device)
        return None
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    if dist.distributed_c10d._rank_not_in_group(group):
        return group
    try:
        backend = group._get_backend(torch.device("npu"))
    except RuntimeError as error:
        raise ValueError(f"reinit_process_group: the group has no hccl backend for npu ({error})") from None
    if not isinstance(backend, ProcessGroupHCCL):
        raise ValueError(f"reinit_process_group rebuilds hccl communicators; the group's backend for npu "
                         f"is {type(backend).__name__}")
    backend._rebuild_communicators("reinit_process_group")
    return group


def _create_process_group_hccl(store: dist.Store, rank: int, size: int,
                               timeout: timedelta) -> ProcessGroupHCCL:
    """torch.distributed's constructor hook for ``init_process_group("hccl")``
    and ``new_group(backend="hccl")``.

    With ``RANK_TABLE_FILE`` set, the default group's communicator is made
    from that HCCL rank table, as torch_npu does; groups made later (while
    the default group exists) use a root info shared through the store."""
    rank_table = os.environ.get("RANK_TABLE_FILE", "") if not dist.is_initialized() else ""
    if rank_table:
        _check_rank_table_size(rank_table, size)
    return ProcessGroupHCCL(store, rank, size, timeout, rank_table)


def _check_rank_table_size(path: str, size: int) -> None:
    """A rank table listing another number of ranks than the group has would
    make HCCL wait for ranks that never come: refuse it at once. (A table
    that cannot be read, parsed or is not finished is left to HCCL, whose
    error says where.)"""
    try:
        with open(path, encoding="utf-8") as f:
            table = json.load(f)
        listed = sum(len(server.get("device", [])) for server in table.get("server_list", []))
        finished = table.get("status") == "completed"
    except (OSError, ValueError, AttributeError, TypeError):
        return
    if finished and listed not in (0, size):
        raise ValueError(f"ProcessGroupHCCL: the rank table {path!r} (RANK_TABLE_FILE) lists {listed} ranks, "
                         f"but the process group has {size}: make the table list every rank of the job, "
                         "or unset RANK_TABLE_FILE")


def _initialize_plugin(torch_npu: ModuleType) -> None:
    """Entry point of the ``torch_npu.plugins`` group: registers the hccl backend."""
    if not dist.is_available() or BACKEND_NAME in dist.Backend.backend_list:
        return
    # devices=["npu"]: hccl becomes npu's default backend, so that
    # init_process_group() without a backend uses it for npu tensors.
    dist.Backend.register_backend(BACKEND_NAME, _create_process_group_hccl, devices=["npu"])
    dist.is_hccl_available = is_hccl_available
    dist.reinit_process_group = reinit_process_group
