"""``torch.npu.mstx``: marks and ranges on the profiling timeline, as Ascend's
``torch_npu.npu.mstx`` documents them.

Each call becomes an activity record of kind ``"mstx"`` (Note [mstx records],
``csrc/npu/NPUMstx.h``), collected by ``torch_npu.profiler`` and by
``torch.profiler`` with ``ProfilerActivity.PrivateUse1``. With a ``stream``,
the mark or range also shows on that stream's device lane, timed when the
stream reaches it. While no profiler records, the calls record nothing.

Unlike Ascend's, misuse raises (``TypeError`` / ``ValueError``) instead of
warning and returning 0 or -1: a range id that no ``range_start`` returned, or
a ``range_pop`` with nothing pushed, is a bug in the caller.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, TypeVar

import torch

from .. import _C

__all__ = ["mstx"]

_F = TypeVar("_F", bound=Callable[..., Any])

_DEFAULT_DOMAIN = "default"
_NPU_DEVICE_TYPE = int(torch._C._autograd.DeviceType.PrivateUse1)  # torch.Stream.device_type of npu streams


def _check_text(value: object, what: str, call: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"mstx.{call}: the {what} must be a str, got {type(value).__name__}")
    return value


def _stream_args(stream: Optional[torch.Stream], call: str) -> tuple[int, int]:
    """(stream_id, device_index) of an npu stream; (-1, -1) for none."""
    if stream is None:
        return -1, -1
    if not isinstance(stream, torch.Stream) or stream.device_type != _NPU_DEVICE_TYPE:
        raise TypeError(
            f"mstx.{call}: stream must be an npu stream (torch.npu.Stream, torch.npu.current_stream()) or None, "
            f"got {stream!r}"
        )
    return stream.stream_id, stream.device_index


class _Range:
    """A range around a block (``with``) or around every call of a function
    (decorator); the function's name is the message when none is given."""

    def __init__(self, message: str = "", stream: Optional[torch.Stream] = None,
                 domain: str = _DEFAULT_DOMAIN) -> None:
        self.message = _check_text(message, "message", "mstx_range")
        self.stream = stream
        self.domain = _check_text(domain, "domain", "mstx_range")
        self._ids: list[int] = []

    def __enter__(self) -> "_Range":
        self._ids.append(mstx.range_start(self.message, self.stream, self.domain))
        return self

    def __exit__(self, *exc_info: object) -> None:
        mstx.range_end(self._ids.pop(), self.domain)

    def __call__(self, func: _F) -> _F:
        message = self.message or getattr(func, "__qualname__", getattr(func, "__name__", "function"))

        @functools.wraps(func)
        def ranged(*args: Any, **kwargs: Any) -> Any:
            range_id = mstx.range_start(message, self.stream, self.domain)
            try:
                return func(*args, **kwargs)
            finally:
                mstx.range_end(range_id, self.domain)

        return ranged  # type: ignore[return-value]


class mstx:  # noqa: N801 - Ascend's name
    """mstx's calls (all static): ``mark``, ``range_start``/``range_end``,
    ``range_push``/``range_pop``, ``mstx_range`` and ``annotate``."""

    @staticmethod
    def mark(message: str, stream: Optional[torch.Stream] = None, domain: str = _DEFAULT_DOMAIN) -> None:
        """An instant named ``message`` in ``domain``, on the host timeline and,
        with ``stream``, where that stream's work has reached."""
        stream_id, device = _stream_args(stream, "mark")
        _C._mstx_mark(_check_text(message, "message", "mark"), stream_id, device,
                      _check_text(domain, "domain", "mark"))

    @staticmethod
    def range_start(message: str, stream: Optional[torch.Stream] = None, domain: str = _DEFAULT_DOMAIN) -> int:
        """Starts a range; returns its id (never 0) for :meth:`range_end`,
        which any thread may call. With ``stream``, the device range covers
        the work enqueued on ``stream`` until the end call."""
        stream_id, device = _stream_args(stream, "range_start")
        return _C._mstx_range_start(_check_text(message, "message", "range_start"), stream_id, device,
                                    _check_text(domain, "domain", "range_start"))

    @staticmethod
    def range_end(range_id: int, domain: str = _DEFAULT_DOMAIN) -> None:
        """Ends the range ``range_start`` returned ``range_id`` for (in the same domain)."""
        if not isinstance(range_id, int) or isinstance(range_id, bool) or range_id <= 0:
            raise ValueError(f"mstx.range_end: {range_id!r} is not a range id; pass what mstx.range_start returned")
        _C._mstx_range_end(range_id, _check_text(domain, "domain", "range_end"))

    @staticmethod
    def range_push(message: str, stream: Optional[torch.Stream] = None, domain: str = _DEFAULT_DOMAIN) -> int:
        """Opens a range nested in the calling thread's open ranges of
        ``domain``; returns its depth (0 for the outermost)."""
        stream_id, device = _stream_args(stream, "range_push")
        return _C._mstx_range_push(_check_text(message, "message", "range_push"), stream_id, device,
                                   _check_text(domain, "domain", "range_push"))

    @staticmethod
    def range_pop(domain: str = _DEFAULT_DOMAIN) -> int:
        """Closes the calling thread's innermost range of ``domain``; returns
        its depth."""
        return _C._mstx_range_pop(_check_text(domain, "domain", "range_pop"))

    @staticmethod
    def mstx_range(message: str, stream: Optional[torch.Stream] = None, domain: str = _DEFAULT_DOMAIN) -> _Range:
        """A range as a decorator (around each call) or a ``with`` block."""
        return _Range(message, stream, domain)

    annotate = _Range
