"""From a collection's raw data (Note [Profiler raw data]) to the files of
ASCEND_PROFILER_OUTPUT. The same code runs online (the trace handler) and
offline (``analyse``), so both produce the same files."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .._files import write_csv_atomic, write_json_atomic
from ..raw_data import FRAMEWORK_DIR, OUTPUT_DIR, RawRun
from . import tables
from .communication import communication
from .communication_matrix import communication_matrix, has_matrix
from .model import RunModel, build_model
from .trace_view import build_trace_view

__all__ = ["RunModel", "build_model", "build_trace_view", "output_files", "write_output"]


def output_files(model: RunModel) -> dict[str, object]:
    """File name -> content (a list of trace events, or a (header, rows) table)."""
    files: dict[str, object] = {"trace_view.json": build_trace_view(model)}
    if model.has_npu:
        files["kernel_details.csv"] = tables.kernel_details(model)
        files["op_statistic.csv"] = tables.op_statistic(model)
        files["step_trace_time.csv"] = tables.step_trace_time(model)
        if any(item.is_communication for item in model.device_items):
            files["communication.json"] = communication(model)
            if has_matrix(model):
                files["communication_matrix.json"] = communication_matrix(model)
    if model.has_cpu:
        files["operator_details.csv"] = tables.operator_details(model)
        if model.common_config.get("profile_memory"):
            files["memory_record.csv"] = tables.memory_record(model)
            files["operator_memory.csv"] = tables.operator_memory(model)
    return files


def write_output(run: RawRun, result_dir: str | os.PathLike[str]) -> Path:
    """Writes ``result_dir/ASCEND_PROFILER_OUTPUT`` from ``run``. The files are
    assembled in a temporary sibling directory renamed into place at the end,
    so an interrupted analysis leaves no ASCEND_PROFILER_OUTPUT that looks
    complete. With data_simplification (the default, as on CANN) the raw data
    is deleted once the output is in place."""
    result_dir = Path(result_dir)
    model = build_model(run)
    staging = Path(tempfile.mkdtemp(prefix=f".{OUTPUT_DIR}.", dir=result_dir))
    try:
        for name, content in output_files(model).items():
            if name.endswith(".json"):
                write_json_atomic(staging / name, content)
            else:
                header, rows = content
                write_csv_atomic(staging / name, header, rows)
        final = result_dir / OUTPUT_DIR
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{OUTPUT_DIR}.old.", dir=result_dir))
            os.replace(final, old / OUTPUT_DIR)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if model.config.data_simplification:
        shutil.rmtree(result_dir / FRAMEWORK_DIR, ignore_errors=True)
    return final
