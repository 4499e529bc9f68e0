"""``torch_npu.profiler.ProfilerActivity``: what a profile collects."""

from __future__ import annotations

import enum

__all__ = ["ProfilerActivity", "supported_activities"]


class ProfilerActivity(enum.Enum):
    """CPU: the host ops (torch's profiler); NPU: the device work (the
    runtime's activity records), linked to the ops that launched it."""

    CPU = "CPU"
    NPU = "NPU"

    def __str__(self) -> str:
        return f"ProfilerActivity.{self.name}"


def supported_activities() -> set[ProfilerActivity]:
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}
