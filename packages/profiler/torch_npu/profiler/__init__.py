"""torch_npu.profiler: profiling of npu work (the torch-npu-profiler plugin).

``profile`` collects host ops (through torch's profiler) and the device work
they launch (through the runtime's activity records), step by step under a
``schedule``; ``tensorboard_trace_handler`` writes Ascend's result directory
(``*_ascend_pt`` with ASCEND_PROFILER_OUTPUT: trace_view.json and the CSV
files); ``torch_npu.profiler.profiler.analyse`` (or ``python -m
torch_npu.profiler.analyse``) produces that output later from the raw data.
``dynamic_profile`` starts collections in a running training when its
``profiler_config.json`` is edited (or with ``PROF_CONFIG_PATH``). Memory snapshots render as pictures with ``python -m
torch_npu.profiler.memory_viz`` (the ``viz`` extra). See README.md.

Loaded by torch_npu at import through the ``torch_npu.plugins`` entry point.
"""

from __future__ import annotations

from types import ModuleType

from . import dynamic_profile
from .activity import ProfilerActivity, supported_activities
from .experimental_config import (
    AiCMetrics,
    ExportType,
    HostSystem,
    ProfilerLevel,
    _ExperimentalConfig,
    supported_ai_core_metrics,
    supported_export_type,
    supported_profiler_level,
)
from .profiler import profile
from .scheduler import ProfilerAction, Schedule, schedule
from .trace_handler import tensorboard_trace_handler

__version__ = "0.1.0"

__all__ = [
    "AiCMetrics",
    "ExportType",
    "HostSystem",
    "ProfilerAction",
    "ProfilerActivity",
    "ProfilerLevel",
    "Schedule",
    "_ExperimentalConfig",
    "__version__",
    "dynamic_profile",
    "profile",
    "schedule",
    "supported_activities",
    "supported_ai_core_metrics",
    "supported_export_type",
    "supported_profiler_level",
    "tensorboard_trace_handler",
]


def _initialize_plugin(torch_npu: ModuleType) -> None:
    """Entry point of the ``torch_npu.plugins`` group. The profiler API lives
    in this package; what loading does is start dynamic profiling when
    ``PROF_CONFIG_PATH`` is set (dynamic_profile.init_from_environment)."""
    dynamic_profile.init_from_environment()
