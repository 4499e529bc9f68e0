"""``torch_npu.profiler._ExperimentalConfig`` and its enums, as Ascend documents them.

Every documented parameter is accepted and checked; what the simulator cannot
collect (AI Core PMU metrics, L2 cache, host system metrics, ...) is recorded
in ``profiler_info.json`` and otherwise changes nothing (README.md lists them).
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Iterable
from typing import Any

__all__ = ["AiCMetrics", "ExportType", "HostSystem", "ProfilerLevel", "_ExperimentalConfig"]


class _ValueEnum(str, enum.Enum):
    """An enum of strings that prints as its value, as torch_npu's do."""

    def __str__(self) -> str:
        return self.value


class ProfilerLevel(_ValueEnum):
    """How much is collected: Level0 the ops and kernels, Level1 adds the
    kernels' launch details (stream, task id, input shapes and types) and
    api statistics, Level2 the same on the simulator."""

    Level_none = "Level_none"
    Level0 = "Level0"
    Level1 = "Level1"
    Level2 = "Level2"


class AiCMetrics(_ValueEnum):
    """AI Core performance counters (no counterpart on the simulator)."""

    AiCoreNone = "ACL_AICORE_NONE"
    PipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    ArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    Memory = "ACL_AICORE_MEMORY_BANDWIDTH"
    MemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    MemoryUB = "ACL_AICORE_MEMORY_UB"
    ResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    L2Cache = "ACL_AICORE_L2_CACHE"
    MemoryAccess = "ACL_AICORE_MEMORY_ACCESS"


class ExportType(_ValueEnum):
    """Output format: Text (json and csv files) or Db (not supported here)."""

    Text = "text"
    Db = "db"


def supported_profiler_level() -> set[ProfilerLevel]:
    """The profiler levels ``_ExperimentalConfig`` takes here: all of them."""
    return set(ProfilerLevel)


def supported_ai_core_metrics() -> set[AiCMetrics]:
    """The ``aic_metrics`` ``_ExperimentalConfig`` takes: every member (the
    simulator has no AI Core counters to collect; the choice is kept with
    the run's configuration)."""
    return set(AiCMetrics)


def supported_export_type() -> set[ExportType]:
    """The export types a run can write here: Text only (torch_npu also
    lists Db, which ``_ExperimentalConfig`` refuses here)."""
    return {ExportType.Text}


class HostSystem(_ValueEnum):
    """Host system metrics (``host_sys``; not collected on the simulator)."""

    CPU = "cpu"
    MEM = "mem"
    DISK = "disk"
    NETWORK = "network"
    OSRT = "osrt"


def _enum_value(enum_type: type[enum.Enum], value: Any, parameter: str) -> Any:
    if isinstance(value, enum_type):
        return value
    for member in enum_type:
        if value in (member.value, member.name):
            return member
    choices = ", ".join(f"{enum_type.__name__}.{m.name}" for m in enum_type)
    raise ValueError(f"_ExperimentalConfig: {parameter}={value!r} is not one of {choices}")


def _check_bool(value: Any, parameter: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"_ExperimentalConfig: {parameter} must be True or False, got {value!r}")
    return value


def _check_str_list(value: Any, parameter: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"_ExperimentalConfig: {parameter} must be a list of strings, got {value!r}")
    items = list(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"_ExperimentalConfig: {parameter} must be a list of strings, got item {item!r}")
    return items


class _ExperimentalConfig:
    """Extended collection options of ``torch_npu.profiler.profile``.

    Args:
        profiler_level: ``ProfilerLevel.Level0`` (default), ``Level1``,
            ``Level2`` or ``Level_none`` (no device data).
        aic_metrics: an ``AiCMetrics`` member. Needs Level1 or Level2 (at
            Level0 it is reset to ``AiCoreNone`` with a warning, as on CANN).
        l2_cache, op_attr, msprof_tx, mstx, data_simplification,
        record_op_args, sys_io, sys_interconnection: switches.
        export_type: ``ExportType.Text`` or a list of export types.
        gc_detect_threshold: milliseconds (a number >= 0) or None.
        host_sys: a list of ``HostSystem`` members.
        mstx_domain_include / mstx_domain_exclude: lists of domain names
            (exclusive: given both, include applies, with a warning).
        data_simplification: once ASCEND_PROFILER_OUTPUT is written, delete
            the raw data (FRAMEWORK/); offline analysis is then impossible.
    """

    def __init__(
        self,
        profiler_level: ProfilerLevel | str = ProfilerLevel.Level0,
        aic_metrics: AiCMetrics | str = AiCMetrics.AiCoreNone,
        l2_cache: bool = False,
        msprof_tx: bool = False,
        data_simplification: bool = True,
        record_op_args: bool = False,
        op_attr: bool = False,
        gc_detect_threshold: float | None = None,
        export_type: ExportType | str | list[ExportType | str] | None = ExportType.Text,
        host_sys: list[HostSystem | str] | None = None,
        mstx_domain_include: list[str] | None = None,
        mstx_domain_exclude: list[str] | None = None,
        sys_io: bool = False,
        sys_interconnection: bool = False,
        mstx: bool = False,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise TypeError(
                f"_ExperimentalConfig got unknown parameter(s) {sorted(unknown)}; see the README of "
                "torch-npu-profiler for the supported ones")
        self.profiler_level = _enum_value(ProfilerLevel, profiler_level, "profiler_level")
        self.aic_metrics = _enum_value(AiCMetrics, aic_metrics, "aic_metrics")
        if self.profiler_level in (ProfilerLevel.Level0, ProfilerLevel.Level_none) and (
                self.aic_metrics is not AiCMetrics.AiCoreNone):
            warnings.warn(
                f"aic_metrics={self.aic_metrics.name} needs profiler_level Level1 or Level2; "
                "reset to AiCMetrics.AiCoreNone", stacklevel=2)
            self.aic_metrics = AiCMetrics.AiCoreNone
        self.l2_cache = _check_bool(l2_cache, "l2_cache")
        self.msprof_tx = _check_bool(msprof_tx, "msprof_tx")
        self.mstx = _check_bool(mstx, "mstx")
        self.data_simplification = _check_bool(data_simplification, "data_simplification")
        self.record_op_args = _check_bool(record_op_args, "record_op_args")
        self.op_attr = _check_bool(op_attr, "op_attr")
        self.sys_io = _check_bool(sys_io, "sys_io")
        self.sys_interconnection = _check_bool(sys_interconnection, "sys_interconnection")
        if gc_detect_threshold is not None:
            if isinstance(gc_detect_threshold, bool) or not isinstance(gc_detect_threshold, (int, float)):
                raise TypeError("_ExperimentalConfig: gc_detect_threshold must be a number of "
                                f"milliseconds or None, got {gc_detect_threshold!r}")
            if gc_detect_threshold < 0:
                raise ValueError(f"_ExperimentalConfig: gc_detect_threshold must be >= 0, got {gc_detect_threshold}")
        self.gc_detect_threshold = gc_detect_threshold
        if export_type is None:
            export_type = [ExportType.Text]
        if isinstance(export_type, (str, ExportType)):
            export_type = [export_type]
        self.export_type = [_enum_value(ExportType, t, "export_type") for t in export_type]
        if not self.export_type:
            raise ValueError("_ExperimentalConfig: export_type is empty; pass ExportType.Text")
        if ExportType.Db in self.export_type:
            raise ValueError("_ExperimentalConfig: export_type=ExportType.Db (the MindStudio Insight "
                             "database) is not supported by torch-npu-profiler; use ExportType.Text")
        if host_sys is None:
            host_sys = []
        if isinstance(host_sys, (str, HostSystem)) or not isinstance(host_sys, Iterable):
            raise TypeError(f"_ExperimentalConfig: host_sys must be a list of HostSystem members, got {host_sys!r}")
        self.host_sys = [_enum_value(HostSystem, h, "host_sys") for h in host_sys]
        self.mstx_domain_include = _check_str_list(mstx_domain_include, "mstx_domain_include")
        self.mstx_domain_exclude = _check_str_list(mstx_domain_exclude, "mstx_domain_exclude")
        if self.mstx_domain_include and self.mstx_domain_exclude:
            warnings.warn("_ExperimentalConfig: mstx_domain_include and mstx_domain_exclude are exclusive; "
                          "mstx_domain_include applies", stacklevel=2)
            self.mstx_domain_exclude = []

    @property
    def collects_device(self) -> bool:
        """Whether device activity is collected at all (not at Level_none)."""
        return self.profiler_level is not ProfilerLevel.Level_none

    @property
    def detailed(self) -> bool:
        """Level1 and Level2: the extra columns and files."""
        return self.profiler_level in (ProfilerLevel.Level1, ProfilerLevel.Level2)

    def mstx_domain_shown(self, domain: str) -> bool:
        if self.mstx_domain_include:
            return domain in self.mstx_domain_include
        return domain not in self.mstx_domain_exclude

    def to_dict(self) -> dict[str, Any]:
        """The options as profiler_info.json records them."""
        return {
            "_profiler_level": self.profiler_level.value,
            "_aic_metrics": self.aic_metrics.value,
            "_l2_cache": self.l2_cache,
            "_msprof_tx": self.msprof_tx,
            "_mstx": self.mstx,
            "_data_simplification": self.data_simplification,
            "record_op_args": self.record_op_args,
            "_export_type": [t.value for t in self.export_type],
            "_host_sys": [h.value for h in self.host_sys],
            "_op_attr": self.op_attr,
            "_gc_detect_threshold": self.gc_detect_threshold,
            "_mstx_domain_include": self.mstx_domain_include,
            "_mstx_domain_exclude": self.mstx_domain_exclude,
            "_sys_io": self.sys_io,
            "_sys_interconnection": self.sys_interconnection,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> _ExperimentalConfig:
        """The inverse of to_dict (for offline analysis)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cls(
                profiler_level=data.get("_profiler_level", "Level0"),
                aic_metrics=data.get("_aic_metrics", "ACL_AICORE_NONE"),
                l2_cache=data.get("_l2_cache", False),
                msprof_tx=data.get("_msprof_tx", False),
                mstx=data.get("_mstx", False),
                data_simplification=data.get("_data_simplification", True),
                record_op_args=data.get("record_op_args", False),
                export_type=data.get("_export_type", ["text"]),
                host_sys=data.get("_host_sys", []),
                op_attr=data.get("_op_attr", False),
                gc_detect_threshold=data.get("_gc_detect_threshold"),
                mstx_domain_include=data.get("_mstx_domain_include", []),
                mstx_domain_exclude=data.get("_mstx_domain_exclude", []),
                sys_io=data.get("_sys_io", False),
                sys_interconnection=data.get("_sys_interconnection", False),
            )
