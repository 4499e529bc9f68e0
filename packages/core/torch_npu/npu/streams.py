"""npu streams and events, as torch.cuda.Stream / torch.cuda.Event.

Both are the generic ``torch.Stream`` / ``torch.Event`` of PyTorch, backed by
the npu device guard, with the extras of Ascend's torch_npu (``npu_stream``,
``priority``).
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from .. import _C
from ._device import _DeviceLike, _get_device_index

_NPU_DEVICE_TYPE = 20  # c10::DeviceType::PrivateUse1

# Note [npu streams and events under torch.compile]
# Dynamo traces the generic ``torch.Stream`` / ``torch.Event`` (construction,
# ``with stream:``, waits, records) and ``torch.accelerator.current_stream``
# into the graph as stream operations, for any device; it knows
# ``torch.cuda.Stream`` and the like by name, but not these subclasses, and
# tracing into their constructors reaches the runtime's C functions, which
# breaks the graph. So while Dynamo traces (``torch.compiler.is_compiling()``,
# always False when running eagerly) the constructors and ``current_stream``
# / ``stream`` below hand it the generic objects for the npu device: code
# written for torch_npu (``torch.npu.Stream()``, ``with torch.npu.stream(s)``,
# ``torch.npu.Event()``, ``torch.npu.current_stream().wait_stream(s)``)
# compiles into one graph whose kernels run on those streams. Inside
# compiled code they are torch.Stream / torch.Event, so torch_npu's extras
# (``npu_stream``, interprocess events) are not available there.


def _compile_device(device: _DeviceLike) -> torch.device:
    """``device`` as a torch.device of type npu, without runtime calls (Note
    [npu streams and events under torch.compile])."""
    if device is None:
        return torch.device("npu", torch.accelerator.current_device_index())
    if isinstance(device, int):
        return torch.device("npu", device)
    return torch.device(device)


def _lazy_init() -> None:
    from . import _lazy_init as init

    init()


class Stream(torch.Stream):
    """An in-order queue of npu work.

    Args:
        device: the stream's device (current device if None).
        priority: 0 (normal) or negative (high priority), like torch.cuda.
    """

    def __new__(cls, device: _DeviceLike = None, priority: int = 0, **kwargs: Any) -> "Stream":
        if {"stream_id", "device_index", "device_type"} <= kwargs.keys():
            return super().__new__(cls, **kwargs)
        if torch.compiler.is_compiling():
            # Note [npu streams and events under torch.compile]
            return torch.Stream(device=_compile_device(device), priority=priority)
        index = _get_device_index(device, optional=True)
        _C._check_device_index(index)
        _lazy_init()
        stream_id, index = _C._get_stream_from_pool(priority, index)
        return super().__new__(
            cls, stream_id=stream_id, device_index=index, device_type=_NPU_DEVICE_TYPE
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    @classmethod
    def _wrap(cls, packed: tuple[int, int]) -> "Stream":
        # torch.Stream's own constructor: current_stream() is called often.
        stream_id, index = packed
        return torch.Stream.__new__(
            cls, stream_id=stream_id, device_index=index, device_type=_NPU_DEVICE_TYPE
        )

    @property
    def npu_stream(self) -> int:
        """The runtime's stream handle, as an integer."""
        return _C._stream_handle(self.stream_id, self.device_index)

    @property
    def priority(self) -> int:
        return _C._stream_priority(self.stream_id, self.device_index)

    @staticmethod
    def priority_range() -> tuple[int, int]:
        """(least, greatest) priority: (0, -1)."""
        return tuple(_C._stream_priority_range())

    def record_event(self, event: Optional["Event"] = None) -> "Event":
        """Records ``event`` (a new Event if None) on this stream and returns it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def wait_event(self, event: "Event") -> None:
        """Makes all future work on this stream wait for ``event``."""
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        """Makes all future work on this stream wait for the work queued so far
        on ``stream``."""
        self.wait_event(Stream._as_npu(stream).record_event())

    @staticmethod
    def _as_npu(stream: torch.Stream) -> "Stream":
        if isinstance(stream, Stream):
            return stream
        if stream.device_type != _NPU_DEVICE_TYPE:
            raise ValueError(f"Expected an npu stream, got a stream of {stream.device}")
        return Stream._wrap((stream.stream_id, stream.device_index))

    def __repr__(self) -> str:
        return (
            f"<torch_npu.npu.{type(self).__name__} device=npu:{self.device_index} "
            f"npu_stream={self.npu_stream:#x}>"
        )


class ExternalStream(Stream):
    """A stream that other code created (its runtime handle, e.g. from a
    library that calls aclrtCreateStream), wrapped so that torch's work and
    events go to it, as torch.cuda.ExternalStream.

    The stream is not owned: whoever created it keeps it alive while it is
    used here, and ``stream_ptr`` must be a live stream of the runtime (as
    with CUDA, another pointer is undefined behaviour). ``device`` must be
    the stream's device (current device if None).

    Args:
        stream_ptr: the stream's handle, as an integer.
        device: the stream's device.
    """

    def __new__(cls, stream_ptr: int, device: _DeviceLike = None, **kwargs: Any) -> "ExternalStream":
        if kwargs.get("priority", 0) != 0:
            raise RuntimeError("ExternalStream: the priority is the creator's; it cannot be given here")
        if not isinstance(stream_ptr, int) or isinstance(stream_ptr, bool):
            raise TypeError(f"ExternalStream: stream_ptr must be the stream's handle as an int, got "
                            f"{type(stream_ptr).__name__}")
        index = _get_device_index(device, optional=True)
        _C._check_device_index(index)
        _lazy_init()
        stream_id, index = _C._get_stream_from_external(stream_ptr, index)
        return torch.Stream.__new__(cls, stream_id=stream_id, device_index=index, device_type=_NPU_DEVICE_TYPE)


class Event(torch.Event):
    """A marker in a stream's work, for synchronization and timing.

    Like torch.cuda.Event, the event binds to the device of the first stream
    it is recorded on; recording it later on another device is an error.

    Args:
        enable_timing: whether ``elapsed_time`` can be used.
        blocking: accepted for torch.cuda compatibility.
        interprocess: whether other processes may wait for it
            (:meth:`ipc_handle`, :meth:`from_ipc_handle`; torch.multiprocessing
            passes such events). It belongs to the current device, cannot
            time, and only the process that created it records it
            (Note [IPC events] of the simulator).
    """

    def __new__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> "Event":
        if interprocess and enable_timing:
            raise ValueError(
                "an interprocess npu event cannot time: create it with enable_timing=False "
                "(as torch.cuda.Event)"
            )
        if torch.compiler.is_compiling() and not interprocess:
            # Note [npu streams and events under torch.compile]
            return torch.Event(device=torch.device("npu"), enable_timing=enable_timing,
                               blocking=blocking)
        event = super().__new__(
            cls, device=torch.device("npu"), enable_timing=enable_timing, blocking=blocking
        )
        event._enable_timing = enable_timing
        event._recorded = False
        event._ipc = None  # the runtime handle of an interprocess event
        event._ipc_opened = False
        event._ipc_device = -1
        if interprocess:
            torch.npu._lazy_init()
            event._ipc_device = _C._get_device()
            event._ipc = _C._npu_ipc_event_create(event._ipc_device)
        return event

    @classmethod
    def from_ipc_handle(cls, device: _DeviceLike, handle: bytes) -> "Event":
        """The interprocess event of another process that ``handle``
        (its :meth:`ipc_handle`) names; it can be waited for, not recorded."""
        torch.npu._lazy_init()
        event = cls()
        event._ipc_device = _get_device_index(device)
        event._ipc = _C._npu_ipc_event_open(event._ipc_device, bytes(handle))
        event._ipc_opened = True
        event._recorded = True  # whatever its creator recorded
        return event

    def ipc_handle(self) -> bytes:
        """The handle another process opens this event with
        (:meth:`from_ipc_handle`); the event must be interprocess."""
        if self._ipc is None:
            raise RuntimeError("ipc_handle() needs an event created with interprocess=True")
        return _C._npu_ipc_event_handle(self._ipc)

    def _ipc_stream(self, stream: Optional[torch.Stream]) -> "Stream":
        stream = current_stream(self._ipc_device) if stream is None else Stream._as_npu(stream)
        if stream.device_index != self._ipc_device:
            raise RuntimeError(
                f"the interprocess event belongs to npu:{self._ipc_device}, the stream is on "
                f"npu:{stream.device_index}"
            )
        return stream

    def __del__(self) -> None:
        if getattr(self, "_ipc", None) is not None:
            _C._npu_ipc_event_destroy(self._ipc)
            self._ipc = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record(self, stream: Optional[torch.Stream] = None) -> None:
        """Records the event on ``stream`` (the current stream if None)."""
        if self._ipc is not None:
            if self._ipc_opened:
                raise RuntimeError(
                    "an event opened from another process (Event.from_ipc_handle) cannot be "
                    "recorded; only the process that created it records it"
                )
            s = self._ipc_stream(stream)
            _C._npu_ipc_event_record(self._ipc, s.stream_id, s.device_index)
            self._recorded = True
            return
        # None: torch.Event records on the current stream of its device.
        super().record(stream)
        self._recorded = True

    def wait(self, stream: Optional[torch.Stream] = None) -> None:
        """Makes all future work on ``stream`` (current stream if None) wait
        for the work recorded before this event."""
        if not self._recorded:
            raise RuntimeError(
                "Event.wait() on an npu event that was never recorded: call "
                "event.record() (or stream.record_event()) before waiting on it."
            )
        if self._ipc is not None:
            s = self._ipc_stream(stream)
            _C._npu_ipc_event_wait(self._ipc, s.stream_id, s.device_index)
            return
        super().wait(current_stream() if stream is None else stream)

    def query(self) -> bool:
        """True when the work recorded before this event has finished (or it
        was never recorded)."""
        if self._ipc is not None:
            return bool(_C._npu_ipc_event_query(self._ipc))
        return bool(super().query())

    def synchronize(self) -> None:
        """Blocks the host until the work recorded before this event has finished."""
        if self._ipc is not None:
            _C._npu_ipc_event_synchronize(self._ipc)
            return
        super().synchronize()

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds from this event to ``end_event`` (both recorded, both
        with enable_timing=True, and both complete)."""
        if not (self._enable_timing and getattr(end_event, "_enable_timing", False)):
            raise RuntimeError(
                "elapsed_time needs both events created with enable_timing=True."
            )
        if not (self._recorded and getattr(end_event, "_recorded", False)):
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return float(_C._event_elapsed_time(self.event_id, end_event.event_id))

    def __repr__(self) -> str:
        return f"<torch_npu.npu.Event device=npu:{self.device.index} recorded={self._recorded}>"


def current_stream(device: _DeviceLike = None) -> Stream:
    """The calling thread's current stream on ``device`` (current device if None)."""
    if torch.compiler.is_compiling():
        # Note [npu streams and events under torch.compile]
        return torch.accelerator.current_stream(_compile_device(device))
    return Stream._wrap(_C._get_current_stream(_get_device_index(device, optional=True)))


def default_stream(device: _DeviceLike = None) -> Stream:
    """The default stream of ``device`` (current device if None)."""
    return Stream._wrap(_C._get_default_stream(_get_device_index(device, optional=True)))


def set_stream(stream: Optional[torch.Stream]) -> None:
    """Makes ``stream`` the calling thread's current stream on its device."""
    if stream is None:
        return
    stream = Stream._as_npu(stream)
    _C._set_current_stream(stream.stream_id, stream.device_index)


class StreamContext:
    """Context manager that makes ``stream`` current (and its device current)."""

    def __init__(self, stream: Optional[torch.Stream]) -> None:
        self.stream = None if stream is None else Stream._as_npu(stream)
        self._prev_device = -1
        self._prev_stream: Optional[Stream] = None
        self._prev_stream_on_target: Optional[Stream] = None

    def __enter__(self) -> Optional[Stream]:
        if self.stream is None:
            return None
        self._prev_stream = current_stream()
        self._prev_stream_on_target = current_stream(self.stream.device_index)
        self._prev_device = _C._exchange_device(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc: Any) -> bool:
        if self.stream is None:
            return False
        set_stream(self._prev_stream_on_target)
        _C._exchange_device(self._prev_device)
        set_stream(self._prev_stream)
        return False


def stream(stream: Optional[torch.Stream]) -> "StreamContext | torch.Stream":
    """``with torch.npu.stream(s):`` runs the block with ``s`` current."""
    if torch.compiler.is_compiling() and stream is not None:
        # Note [npu streams and events under torch.compile]: a torch.Stream
        # is its own context manager.
        return stream
    return StreamContext(stream)
