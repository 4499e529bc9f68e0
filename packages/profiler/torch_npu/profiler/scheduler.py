"""``torch_npu.profiler.schedule``: which steps are skipped, warmed up and recorded."""

from __future__ import annotations

from torch.profiler import ProfilerAction

__all__ = ["ProfilerAction", "Schedule", "schedule", "default_schedule"]


class Schedule:
    """The action of each step (a callable ``step -> ProfilerAction``).

    After ``skip_first`` steps, cycles of ``wait`` idle steps, ``warmup``
    steps that prepare collection and ``active`` recorded steps; the last
    active step of a cycle is ``RECORD_AND_SAVE`` (the trace is handed to
    ``on_trace_ready`` when it ends). ``repeat`` cycles, or forever when 0.
    The argument order is Ascend's: ``schedule(wait, active, warmup, repeat,
    skip_first)``.
    """

    def __init__(self, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0) -> None:
        for name, value in (("wait", wait), ("active", active), ("warmup", warmup), ("repeat", repeat),
                            ("skip_first", skip_first)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"torch_npu.profiler.schedule: {name} must be an int, got {value!r}")
            if value < 0:
                raise ValueError(f"torch_npu.profiler.schedule: {name} must be >= 0, got {value}")
        if active < 1:
            raise ValueError("torch_npu.profiler.schedule: active must be >= 1 (the number of recorded "
                             f"steps per cycle), got {active}")
        self.wait, self.active, self.warmup = wait, active, warmup
        self.repeat, self.skip_first = repeat, skip_first

    def __call__(self, step: int) -> ProfilerAction:
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        cycle = self.wait + self.warmup + self.active
        if self.repeat > 0 and step // cycle >= self.repeat:
            return ProfilerAction.NONE
        position = step % cycle
        if position < self.wait:
            return ProfilerAction.NONE
        if position < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if position < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    def to_dict(self) -> dict[str, int]:
        return {"wait": self.wait, "active": self.active, "warmup": self.warmup, "repeat": self.repeat,
                "skip_first": self.skip_first}

    def __repr__(self) -> str:
        return "schedule(" + ", ".join(f"{k}={v}" for k, v in self.to_dict().items()) + ")"


def schedule(wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0) -> Schedule:
    """The step schedule of ``torch_npu.profiler.profile`` (see Schedule)."""
    return Schedule(wait, active, warmup, repeat, skip_first)


def default_schedule(step: int) -> ProfilerAction:
    """Without a schedule every step is recorded, from start() to stop()."""
    return ProfilerAction.RECORD

