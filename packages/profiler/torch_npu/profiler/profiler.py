"""``torch_npu.profiler.profile`` and ``analyse``."""

from __future__ import annotations

import json
import multiprocessing
import os
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerAction

from ._files import write_json_atomic
from .activity import ProfilerActivity, supported_activities
from .analysis import build_model, build_trace_view, write_output
from .collector import Collector
from .experimental_config import _ExperimentalConfig
from .raw_data import INFO_FILE, RawRun, is_result_dir, read_raw
from .scheduler import Schedule, default_schedule

__all__ = ["analyse", "profile"]

_COLLECTING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class profile:  # noqa: N801 (the documented name)
    """Profiles host ops and the npu work they launch.

    Used as a context manager or with start()/stop(); step() marks the end of
    a training step (the schedule decides which steps are recorded). When a
    recorded cycle ends, ``on_trace_ready(prof)`` runs; with
    ``tensorboard_trace_handler(dir)`` it writes an ``*_ascend_pt`` result
    directory. See README.md for the files and their columns.

    Args:
        activities: ``ProfilerActivity.CPU`` and/or ``ProfilerActivity.NPU``
            (default both).
        schedule: a ``torch_npu.profiler.schedule(...)`` or any callable
            ``step -> ProfilerAction``; default: record from start to stop.
        on_trace_ready: called with this profile when a recording ends.
        record_shapes, profile_memory, with_stack, with_flops, with_modules:
            passed to torch's profiler for the host ops.
        experimental_config: a ``_ExperimentalConfig``.
        use_cuda: accepted and ignored (Ascend's signature has it).
    """

    def __init__(
        self,
        activities: Iterable[ProfilerActivity] | None = None,
        schedule: Callable[[int], ProfilerAction] | None = None,
        on_trace_ready: Callable[[profile], Any] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: _ExperimentalConfig | None = None,
        use_cuda: bool | None = None,
    ) -> None:
        activities = set(supported_activities() if activities is None else activities)
        for activity in activities:
            if not isinstance(activity, ProfilerActivity):
                raise TypeError(f"torch_npu.profiler.profile: activities must be ProfilerActivity members "
                                f"(CPU, NPU), got {activity!r}")
        if not activities:
            raise ValueError("torch_npu.profiler.profile: activities is empty; pass ProfilerActivity.CPU "
                             "and/or ProfilerActivity.NPU")
        for name, value in (("record_shapes", record_shapes), ("profile_memory", profile_memory),
                            ("with_stack", with_stack), ("with_flops", with_flops), ("with_modules", with_modules)):
            if not isinstance(value, bool):
                raise TypeError(f"torch_npu.profiler.profile: {name} must be True or False, got {value!r}")
        if experimental_config is None:
            experimental_config = _ExperimentalConfig()
        if not isinstance(experimental_config, _ExperimentalConfig):
            raise TypeError("torch_npu.profiler.profile: experimental_config must be a "
                            f"torch_npu.profiler._ExperimentalConfig, got {type(experimental_config).__name__}")
        if schedule is not None and not callable(schedule):
            raise TypeError(f"torch_npu.profiler.profile: schedule must be callable, got {schedule!r}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(f"torch_npu.profiler.profile: on_trace_ready must be callable, got {on_trace_ready!r}")
        self.activities = activities
        self.schedule = schedule if schedule is not None else default_schedule
        self.on_trace_ready = on_trace_ready
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack, self.with_flops, self.with_modules = with_stack, with_flops, with_modules
        self.experimental_config = experimental_config
        self.step_num = 0
        self.current_action: ProfilerAction | None = None
        self._collector: Collector | None = None
        self._collecting = False
        self._step_record: torch.autograd.profiler.record_function | None = None
        self._metadata: dict[str, Any] = {}
        self._raw_run: RawRun | None = None
        self._finished_kineto: torch.profiler._KinetoProfile | None = None
        # Named in the error when another profiling mode is already collecting.
        self._session_name = "torch_npu.profiler.profile"

    # -- the step state machine -------------------------------------------------

    def start(self) -> None:
        self._start_from(0)

    def _start_from(self, step_num: int) -> None:
        """Starts with the step counter at ``step_num``: dynamic_profile starts
        mid-run and keeps the training's step numbers (ProfilerStep#N)."""
        self.step_num = step_num
        self.current_action = self.schedule(self.step_num)
        self._transit(None, self.current_action)
        self._enter_step()

    def stop(self) -> None:
        self._exit_step()
        previous, self.current_action = self.current_action, None
        self._transit(previous, None)

    def step(self) -> None:
        """Ends the current step and starts the next one."""
        self._exit_step()
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(previous, self.current_action)
        self._enter_step()

    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _enter_step(self) -> None:
        if self._collecting:
            self._step_record = torch.autograd.profiler.record_function(f"ProfilerStep#{self.step_num}")
            self._step_record.__enter__()

    def _exit_step(self) -> None:
        if self._step_record is not None:
            record, self._step_record = self._step_record, None
            record.__exit__(None, None, None)

    def _new_collector(self) -> Collector:
        schedule = self.schedule.to_dict() if isinstance(self.schedule, Schedule) else None
        common = {
            "activities": sorted(str(a) for a in self.activities),
            "schedule": schedule,
            "record_shapes": self.record_shapes,
            "profile_memory": self.profile_memory,
            "with_stack": self.with_stack,
            "with_flops": self.with_flops,
            "with_modules": self.with_modules,
        }
        return Collector(self.activities, self.record_shapes, self.profile_memory, self.with_stack,
                         self.with_flops, self.with_modules, self.experimental_config, common,
                         session_name=self._session_name)

    def _transit(self, previous: ProfilerAction | None, current: ProfilerAction | None) -> None:
        if self._collecting and (current not in _COLLECTING or previous is ProfilerAction.RECORD_AND_SAVE):
            if previous is ProfilerAction.RECORD and current is not None:
                warnings.warn("torch_npu.profiler: the schedule left the active steps before their "
                              "RECORD_AND_SAVE step; the trace is saved now", stacklevel=3)
            self._finish_window()
        if current in (None, ProfilerAction.NONE) and self._collector is not None and not self._collecting:
            self._collector.discard()  # a warmup that no recording followed
            self._collector = None
        if current is ProfilerAction.WARMUP and self._collector is None:
            collector = self._new_collector()
            collector.prepare()  # raises when another profiling mode is active
            self._collector = collector
        if current in _COLLECTING and not self._collecting:
            if self._collector is None:
                self._collector = self._new_collector()
            self._collector.start()
            self._collecting = True

    def _finish_window(self) -> None:
        collector, self._collector = self._collector, None
        self._collecting = False
        collector.metadata.update(self._metadata)
        self._raw_run = collector.stop()
        self._finished_kineto = collector.finished_kineto
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # -- results --------------------------------------------------------------

    def add_metadata(self, key: str, value: str) -> None:
        """Adds ``key: value`` (strings) to profiler_metadata.json."""
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"add_metadata: key and value must be strings, got {key!r}: {value!r}")
        self._metadata[key] = value

    def add_metadata_json(self, key: str, value: str) -> None:
        """Adds ``key`` with ``value``, a JSON document, to profiler_metadata.json."""
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"add_metadata_json: key and value must be strings, got {key!r}: {value!r}")
        try:
            self._metadata[key] = json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"add_metadata_json: the value of {key!r} is not valid JSON ({e})") from e

    @property
    def raw_run(self) -> RawRun | None:
        """What the last finished recording collected (None before one finished)."""
        return self._raw_run

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Writes the last recording's trace (trace_view.json's content) to ``path``."""
        if self._raw_run is None:
            raise RuntimeError("export_chrome_trace: nothing recorded yet; call it after stop() (or from "
                               "on_trace_ready)")
        write_json_atomic(path, build_trace_view(build_model(self._raw_run)))


    def export_memory_timeline(self, path: str | os.PathLike[str], device: str | None = None) -> None:
        """Writes the memory over time of the last recording on ``device``
        (default: the current npu), by category (parameters, gradients,
        activations, optimizer state, ...), as torch.profiler's does: ``.html``
        (a plot), ``.json`` or ``.json.gz`` (times and bytes per category).
        Needs ``profile_memory``, ``record_shapes`` and ``with_stack`` and
        ProfilerActivity.CPU (torch's categorization reads the op graph)."""
        missing = [name for name in ("profile_memory", "record_shapes", "with_stack") if not getattr(self, name)]
        if missing:
            raise RuntimeError(f"export_memory_timeline: profile with {', '.join(f'{m}=True' for m in missing)} "
                               "(the memory timeline categorizes tensors from torch's op graph)")
        if self._finished_kineto is None:
            raise RuntimeError("export_memory_timeline: nothing recorded with ProfilerActivity.CPU yet; call it "
                               "after stop() (or from on_trace_ready)")
        if device is None:
            device = f"npu:{torch.npu.current_device()}"
        path = os.fspath(path)
        if not path.endswith((".html", ".json", ".json.gz", ".raw.json.gz")):
            raise ValueError(f"export_memory_timeline: {path!r} must end with .html, .json or .json.gz")
        with warnings.catch_warnings():
            # torch deprecates its own method in favour of CUDA memory
            # snapshots; this API is Ascend's and stays.
            warnings.filterwarnings("ignore", message=".*export_memory_timeline.*", category=FutureWarning)
            self._finished_kineto.export_memory_timeline(path, device)


def _result_dirs(path: Path) -> list[Path]:
    if is_result_dir(path) or (path / INFO_FILE).is_file():
        return [path]  # read_raw explains a result whose raw data was deleted
    if not path.is_dir():
        raise ValueError(f"analyse: {path} is not a directory")
    found = sorted(child for child in path.iterdir() if child.is_dir() and is_result_dir(child))
    if not found:
        raise ValueError(
            f"analyse: {path} is not a torch_npu.profiler result and holds none (a result is a "
            "*_ascend_pt directory with profiler_info.json and FRAMEWORK/, written by "
            "tensorboard_trace_handler)")
    return found


def _analyse_one(result_dir: str) -> str:
    return str(write_output(read_raw(result_dir), result_dir))


def analyse(profiler_path: str | os.PathLike[str], max_process_number: int | None = None,
            export_type: str | list[str] | None = None) -> list[str]:
    """Produces ASCEND_PROFILER_OUTPUT for one result directory, or for every
    result directory directly under ``profiler_path`` (one per rank), from
    their raw data; several at once in up to ``max_process_number`` processes
    (default: half the CPUs). Returns the output directories.

    ``export_type`` is accepted for Ascend compatibility; only "text" is
    produced."""
    for kind in ([export_type] if isinstance(export_type, str) else (export_type or [])):
        if str(kind).lower() != "text":
            raise ValueError(f"analyse: export_type {kind!r} is not supported; use 'text'")
    if max_process_number is None:
        max_process_number = max(1, (os.cpu_count() or 2) // 2)
    if isinstance(max_process_number, bool) or not isinstance(max_process_number, int) or max_process_number < 1:
        raise ValueError(f"analyse: max_process_number must be an int >= 1, got {max_process_number!r}")
    dirs = [str(d) for d in _result_dirs(Path(profiler_path))]
    if len(dirs) == 1 or max_process_number == 1:
        return [_analyse_one(d) for d in dirs]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(max_process_number, len(dirs)), mp_context=context) as pool:
        return list(pool.map(_analyse_one, dirs))
