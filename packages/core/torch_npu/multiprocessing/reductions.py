"""Pickling npu tensors and storages between processes by sharing their
device memory, as :mod:`torch.multiprocessing` does for CUDA tensors.

Note [npu tensors between processes]
A process putting an npu tensor on a ``torch.multiprocessing`` queue (or
passing it to a child process) exports the device memory of its storage
with CANN's IPC functions (``aclrtIpcMemGetExportKey``; the caching
allocator's whole segment, as CUDA shares a block's segment): the receiver
imports the key and gets a tensor on the same device memory, so writes of
either process are seen by the other once it synchronises. Nothing is
copied.

Before exporting, the sender synchronises the tensor's device, so work
queued on the tensor is visible to the receiver (CUDA passes an event of
the current stream instead; queues pickle in their feeder thread, whose
current stream need not be the one that wrote the tensor, so the whole
device is waited for). Freeing a received storage synchronises its device
before unmapping the memory, so no queued work touches it afterwards.

The sender's block must stay allocated while any receiver uses it. torch
counts receivers of CUDA memory in a shared reference-count file; here
each send makes a pipe instead: the sender keeps the storage and the read
end, and pickles the write end along with the key (multiprocessing's
``DupFd``, the same machinery that passes CPU tensors' file descriptors).
The receiver's storage owns the write end and closes it when it is freed,
and the kernel closes it when the receiver dies, however it dies. Once no
process holds the write end, the read end reports hang-up and the sender
drops its reference (and revokes the key) at its next send or
:func:`ipc_collect`. A message that is never received keeps the write end
in multiprocessing's resource sharer, so its block stays alive until the
sender exits: the same leak CUDA's counting has.

Interprocess events (``torch.npu.Event(interprocess=True)``) pass their
handle (CANN's ``aclrtIpcGetEventHandle``); the receiver opens it and can
wait for what the sender records on it, not record it itself.

Each send of a storage of this process is a separate export. A receiver
maps each key once and gives the storage it made for a key again when the
key arrives again (as CUDA caches received handles); a storage sent twice
in one message is therefore two storages on the same memory in the
receiver. A received storage sent on to a third process (or back) passes
its key along instead of exporting imported memory again: the forwarding
process holds its storage, and with it its own release of the original
sender's memory, until the third process released it.
"""

from __future__ import annotations

import os
import select
import threading
from multiprocessing import context, reduction, util
from multiprocessing.reduction import DupFd
from typing import Any

import torch
from torch.multiprocessing import reductions as _torch_reductions
from torch.nn.parameter import Parameter

__all__ = ["init_reductions", "ipc_collect"]


class _SentStorages:
    """The storages this process shared, each until its receivers released it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (storage, read end of the release pipe, key this process exported
        # for it or None when it forwarded a received key)
        self._held: list[tuple[torch.UntypedStorage, int, bytes | None]] = []

    def add(self, storage: torch.UntypedStorage, read_fd: int, key: bytes | None) -> None:
        with self._lock:
            self._held.append((storage, read_fd, key))

    def collect(self) -> int:
        """Drops the storages no receiver holds any more; returns how many."""
        with self._lock:
            if not self._held:
                return 0
            poller = select.poll()
            for _, fd, _ in self._held:
                poller.register(fd, select.POLLIN)
            released = {fd for fd, events in poller.poll(0) if events & (select.POLLHUP | select.POLLERR)}
            kept, dropped = [], []
            for entry in self._held:
                (dropped if entry[1] in released else kept).append(entry)
            self._held = kept
        from .. import _C

        for _, fd, key in dropped:
            os.close(fd)
            if key is not None:
                _C._npu_ipc_close(key)
        return len(dropped)

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)


_sent = _SentStorages()


def ipc_collect() -> None:
    """Frees the npu memory this process shared with other processes once
    they released it (as :func:`torch.cuda.ipc_collect`).

    Sending another tensor does this too; call it when a process that sent
    tensors sends no more but wants the memory back.
    """
    _sent.collect()


def _share_npu_storage(storage: torch.UntypedStorage) -> tuple[Any, ...]:
    """What a receiver needs to map `storage`: (device index, key, bytes,
    offset in the shared memory, release pipe's write end)."""
    from .. import _C

    _sent.collect()
    device = storage.device.index
    torch.npu.synchronize(device)
    holder = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
    forwarded = _C._npu_ipc_imported_key(holder)
    if forwarded is not None:
        # Received from another process: pass its key on. Holding the
        # storage holds this process's release of the original sender's
        # memory, so the memory outlives every receiver down the line.
        key, offset = forwarded
        own_key = None
    else:
        key, _, offset = _C._npu_ipc_share_storage(holder)
        own_key = key
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    try:
        release = _fd_for_receiver(write_fd)
    except BaseException:
        os.close(read_fd)
        if own_key is not None:
            _C._npu_ipc_close(own_key)
        raise
    finally:
        os.close(write_fd)  # _fd_for_receiver made the receiver's copy
    _sent.add(storage, read_fd, own_key)
    return (device, key, storage.nbytes(), offset, release)


def _fd_for_receiver(fd: int) -> Any:
    """A picklable copy of `fd` for the process that unpickles it."""
    popen = context.get_spawning_popen()
    if popen is None:
        # A queue: multiprocessing's resource sharer keeps a duplicate until
        # the receiver takes it.
        return DupFd(fd)
    # The arguments of a process being started: its Popen passes the
    # descriptor number at the start, so that descriptor stays open until
    # the Popen is collected (the started process has its own copy then).
    copy = os.dup(fd)
    util.Finalize(popen, os.close, args=(copy,))
    return DupFd(copy)


def _rebuild_npu_storage(device: int, key: bytes, nbytes: int, offset: int, release: Any) -> torch.UntypedStorage:
    from .. import _C

    torch.npu._lazy_init()
    fd = release.detach()
    os.set_inheritable(fd, False)  # a process this one starts must not keep the memory alive
    return _C._npu_ipc_open_storage(key, device, offset, nbytes, fd).untyped_storage()


def _storage_args(storage: torch.UntypedStorage) -> tuple[Any, ...] | None:
    # An empty storage shares nothing; it is rebuilt empty.
    return _share_npu_storage(storage) if storage.nbytes() > 0 else None


def _open_storage(device: int, args: tuple[Any, ...] | None) -> torch.UntypedStorage:
    if args is None:
        return torch.UntypedStorage(0, device=torch.device("npu", device))
    return _rebuild_npu_storage(*args)


def _rebuild_npu_tensor(
    cls: type,
    size: torch.Size,
    stride: tuple[int, ...],
    storage_offset: int,
    dtype: torch.dtype,
    requires_grad: bool,
    device: int,
    storage_args: tuple[Any, ...] | None,
) -> torch.Tensor:
    storage = _open_storage(device, storage_args)
    t = torch.empty(0, dtype=dtype, device=storage.device).set_(storage, storage_offset, size, stride)
    if cls is Parameter:
        return Parameter(t, requires_grad=requires_grad)
    t.requires_grad = requires_grad
    return t


def _rebuild_npu_untyped_storage(device: int, storage_args: tuple[Any, ...] | None) -> torch.UntypedStorage:
    return _open_storage(device, storage_args)


def _rebuild_npu_typed_storage(
    device: int, storage_args: tuple[Any, ...] | None, dtype: torch.dtype
) -> torch.TypedStorage:
    return torch.TypedStorage(wrap_storage=_open_storage(device, storage_args), dtype=dtype, _internal=True)


def _reduce_npu_tensor(tensor: torch.Tensor) -> tuple[Any, ...]:
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(
            "cannot send an npu tensor that requires grad and is not a leaf to another process: "
            "autograd does not cross process boundaries; send tensor.detach() to share its data"
        )
    if tensor.layout != torch.strided or tensor.is_nested:
        raise RuntimeError(
            f"sharing an npu tensor with layout {tensor.layout} between processes is not supported; "
            "send a dense (strided) tensor"
        )
    torch.utils.hooks.warn_if_has_hooks(tensor)
    storage = tensor.untyped_storage()
    return (
        _rebuild_npu_tensor,
        (
            type(tensor),
            tensor.size(),
            tensor.stride(),
            tensor.storage_offset(),
            tensor.dtype,
            tensor.requires_grad,
            storage.device.index,
            _storage_args(storage),
        ),
    )


def _with_npu(torch_reducer: Any, npu_reducer: Any, device_of: Any = lambda obj: obj.device) -> Any:
    def reduce(obj: Any) -> Any:
        if device_of(obj).type == "npu":
            return npu_reducer(obj)
        return torch_reducer(obj)

    reduce.__name__ = f"reduce_with_npu_{getattr(torch_reducer, '__name__', 'object')}"
    return reduce


def _rebuild_npu_event(device: int, handle: bytes) -> Any:
    return torch.npu.Event.from_ipc_handle(device, handle)


def _reduce_npu_event(event: Any) -> tuple[Any, ...]:
    # Event.ipc_handle() says what is wrong with an event that is not
    # interprocess.
    return (_rebuild_npu_event, (event._ipc_device, event.ipc_handle()))


def init_reductions() -> None:
    """Makes :mod:`torch.multiprocessing` share npu tensors and storages
    (Note [npu tensors between processes]); other devices keep torch's
    reductions. Importing torch_npu calls this."""
    from ..npu.streams import Event

    reduction.register(Event, _reduce_npu_event)
    tensor_types = {torch.Tensor, Parameter, *torch._tensor_classes}
    for t in tensor_types:
        reduction.register(t, _with_npu(_torch_reductions.reduce_tensor, _reduce_npu_tensor))
    reduction.register(
        torch.UntypedStorage,
        _with_npu(
            _torch_reductions.reduce_storage,
            lambda s: (_rebuild_npu_untyped_storage, (s.device.index, _storage_args(s))),
        ),
    )
    reduction.register(
        torch.TypedStorage,
        _with_npu(
            _torch_reductions.reduce_typed_storage,
            lambda s: (
                _rebuild_npu_typed_storage,
                (s._untyped_storage.device.index, _storage_args(s._untyped_storage), s.dtype),
            ),
            device_of=lambda s: s._untyped_storage.device,  # TypedStorage.device warns
        ),
    )
