"""What one collection keeps, and its layout on disk.

Note [Profiler raw data]
A collection (one active window of ``torch_npu.profiler.profile``) keeps
four sources, written as they are into a result directory
``{worker_name}_{timestamp}_ascend_pt/`` (worker name ``{hostname}_{pid}`` by default):

- ``profiler_info.json``: the configuration, the clocks (start and end, on
  CLOCK_MONOTONIC and as CLOCK_REALTIME - CLOCK_MONOTONIC offsets), pid,
  host and rank;
- ``profiler_metadata.json``: add_metadata entries and the run's profiling-
  relevant environment variables;
- ``FRAMEWORK/torch_trace.json``: torch's profiler (Kineto) trace of the host
  ops, with shapes, python stacks, flops and memory events, as torch exports it
  (absent without ProfilerActivity.CPU);
- ``FRAMEWORK/host_ops.json``: core's host ops (Note [Host op correlation
  ids]) and ``FRAMEWORK/device_activity.json``: core's device activity records
  (Note [Device activity records]) of the window. When torch's profiler
  numbered the ops (Note [Kineto correlation for torch_npu.profiler];
  ``start_info.correlation == "kineto"`` in profiler_info.json), the device
  records carry the "External id" of torch's op events and host_ops.json is
  an empty list: the ops are recorded once, by torch's profiler.

Everything under ``ASCEND_PROFILER_OUTPUT/`` is computed from these alone
(torch_npu.profiler.analysis), online by the trace handler or offline by
``analyse``; a directory holding ``profiler_info.json`` and ``FRAMEWORK/`` is a
profiling result. With data_simplification (the default) FRAMEWORK/ is
deleted once ASCEND_PROFILER_OUTPUT is written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._files import read_json, write_json_atomic

INFO_FILE = "profiler_info.json"
METADATA_FILE = "profiler_metadata.json"
FRAMEWORK_DIR = "FRAMEWORK"
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
TORCH_TRACE_FILE = "torch_trace.json"
HOST_OPS_FILE = "host_ops.json"
DEVICE_ACTIVITY_FILE = "device_activity.json"


@dataclass
class RawRun:
    """One collection's raw data (Note [Profiler raw data])."""

    info: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    torch_trace: dict[str, Any] | None = None
    host_ops: list[dict[str, Any]] = field(default_factory=list)
    device_records: list[dict[str, Any]] = field(default_factory=list)


def write_raw(run: RawRun, result_dir: str | os.PathLike[str]) -> None:
    """Writes ``run`` into ``result_dir``; profiler_info.json last, so that a
    directory with it is complete."""
    result_dir = Path(result_dir)
    framework = result_dir / FRAMEWORK_DIR
    if run.torch_trace is not None:
        write_json_atomic(framework / TORCH_TRACE_FILE, run.torch_trace)
    write_json_atomic(framework / HOST_OPS_FILE, run.host_ops)
    write_json_atomic(framework / DEVICE_ACTIVITY_FILE, run.device_records)
    write_json_atomic(result_dir / METADATA_FILE, run.metadata, indent=4)
    write_json_atomic(result_dir / INFO_FILE, run.info, indent=4)


def is_result_dir(path: str | os.PathLike[str]) -> bool:
    path = Path(path)
    return (path / INFO_FILE).is_file() and (path / FRAMEWORK_DIR).is_dir()


def read_raw(result_dir: str | os.PathLike[str]) -> RawRun:
    """Reads what write_raw wrote; a directory that is not a profiling result
    raises ValueError."""
    result_dir = Path(result_dir)
    if (result_dir / INFO_FILE).is_file() and not (result_dir / FRAMEWORK_DIR).exists():
        raise ValueError(
            f"{result_dir}: its raw data ({FRAMEWORK_DIR}/) was deleted after analysis "
            "(_ExperimentalConfig(data_simplification=True), the default); its "
            f"{OUTPUT_DIR} is final. Profile with data_simplification=False to analyse again")
    if not is_result_dir(result_dir):
        raise ValueError(
            f"{result_dir} is not a torch_npu.profiler result: it has no {INFO_FILE} and "
            f"{FRAMEWORK_DIR}/ (pass a *_ascend_pt directory written by tensorboard_trace_handler, "
            "or a directory holding such directories)")
    framework = result_dir / FRAMEWORK_DIR
    torch_trace_path = framework / TORCH_TRACE_FILE
    metadata_path = result_dir / METADATA_FILE
    try:
        return RawRun(
            info=read_json(result_dir / INFO_FILE),
            metadata=read_json(metadata_path) if metadata_path.is_file() else {},
            torch_trace=read_json(torch_trace_path) if torch_trace_path.is_file() else None,
            host_ops=read_json(framework / HOST_OPS_FILE),
            device_records=read_json(framework / DEVICE_ACTIVITY_FILE),
        )
    except (OSError, ValueError) as e:
        raise ValueError(f"{result_dir}: its raw profiling data cannot be read ({e}); the collection "
                         "may have been interrupted") from e
