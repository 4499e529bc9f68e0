"""One collection window: torch's profiler (Kineto) for the host side, core's
device activity records for the device side, linked by correlation ids:
Kineto's own when torch's profiler runs (Note [Kineto correlation for
torch_npu.profiler], in core's NPUActivity.h: each op is recorded once),
else core's host-op callback's (Note [Host op correlation ids]).

Only one window may be open per process: device activity recording is a
process-wide switch.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
from typing import Any

import torch
from torch.profiler import ProfilerActivity as TorchActivity

import torch_npu

from .activity import ProfilerActivity
from .experimental_config import _ExperimentalConfig
from .raw_data import RawRun

_ENV_PREFIXES = ("ASCEND_", "HCCL_", "PYTORCH_NPU_", "NPU_SIM_", "TORCH_NPU_", "ACL_", "MSPROF_")
_ENV_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "OMP_NUM_THREADS", "PROF_CONFIG_PATH")

_lock = threading.Lock()
_open_window: Collector | None = None


def profiling_env() -> dict[str, str]:
    """The environment variables that matter to a profile (ASCEND_*, HCCL_*,
    PYTORCH_NPU_*, NPU_SIM_*, ..., rank variables)."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}


def _rank() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", "-1"))


def _clock_offset_ns() -> int:
    """CLOCK_REALTIME - CLOCK_MONOTONIC, read back to back (the smallest of a
    few tries, which brackets the pair most tightly)."""
    best = None
    for _ in range(5):
        m0 = time.monotonic_ns()
        r = time.time_ns()
        m1 = time.monotonic_ns()
        if best is None or m1 - m0 < best[0]:
            best = (m1 - m0, r - (m0 + m1) // 2)
    return best[1]


def _synchronize_devices() -> None:
    if not torch.npu.is_initialized():
        return
    for device in range(torch.npu.device_count()):
        torch.npu.synchronize(device)


class Collector:
    """Collects one window (prepare, start, stop) into a RawRun."""

    def __init__(self, activities: set[ProfilerActivity], record_shapes: bool, profile_memory: bool,
                 with_stack: bool, with_flops: bool, with_modules: bool, config: _ExperimentalConfig,
                 common_config: dict[str, Any], session_name: str = "torch_npu.profiler.profile") -> None:
        self._cpu = ProfilerActivity.CPU in activities
        self._npu = ProfilerActivity.NPU in activities and config.collects_device
        self._options = dict(record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
                             with_flops=with_flops, with_modules=with_modules)
        self._config = config
        self._common_config = common_config
        self.session_name = session_name
        self._kineto: torch.profiler._KinetoProfile | None = None
        # torch's profiler of the finished window, kept for export_memory_timeline.
        self.finished_kineto: torch.profiler._KinetoProfile | None = None
        self._started = False
        self._start_info: dict[str, Any] = {}
        self.metadata: dict[str, Any] = {}

    def _claim(self) -> None:
        """Takes the process's one profiling slot, from warmup on: torch's
        profiler cannot be prepared twice at once either."""
        global _open_window
        with _lock:
            if _open_window is not None and _open_window is not self:
                raise RuntimeError(
                    f"torch_npu.profiler: {self.session_name} cannot start: {_open_window.session_name} is "
                    "profiling (warming up or collecting) in this process. Two profiling modes at once "
                    "(profile, dynamic_profile, PROF_CONFIG_PATH) are not supported; stop the other one first")
            _open_window = self

    def _unclaim(self) -> None:
        global _open_window
        with _lock:
            if _open_window is self:
                _open_window = None

    @property
    def _kineto_numbers_ops(self) -> bool:
        """Whether torch's profiler gives the host ops their correlation ids
        (Note [Kineto correlation for torch_npu.profiler]): it runs, with the
        npu Kineto plugin, and the device is recorded. Otherwise core's own
        host-op callback numbers them (Note [Host op correlation ids])."""
        C = torch_npu._C
        return (self._cpu and self._npu and C._activity_is_available()
                and C._activity_kineto_plugin_registered())

    def prepare(self) -> None:
        self._claim()
        if self._cpu and self._kineto is None:
            activities = {TorchActivity.CPU}
            if self._kineto_numbers_ops:
                activities.add(TorchActivity.PrivateUse1)
            try:
                self._kineto = torch.profiler._KinetoProfile(activities=activities, **self._options)
                self._kineto.prepare_trace()
            except BaseException:
                self._kineto = None
                self._unclaim()
                raise

    def discard(self) -> None:
        """Drops a prepared window that never started (torch's profiler is
        started and stopped to release what prepare set up)."""
        if self._kineto is not None and not self._started:
            self._kineto.start_trace()
            self._kineto.stop_trace()
        self._kineto = None
        if not self._started:
            self._unclaim()

    def start(self) -> None:
        self._claim()
        try:
            self.prepare()
            C = torch_npu._C
            if self._npu and not C._activity_is_available():
                raise RuntimeError("torch_npu.profiler: ProfilerActivity.NPU needs the runtime's device "
                                   "activity records, which the loaded runtime does not provide; profile "
                                   "with ProfilerActivity.CPU only, or with msprof on CANN")
            if C._activity_is_available():
                _synchronize_devices()
                C._activity_flush()
                C._activity_flush_host_ops()
                if self._kineto_numbers_ops:
                    C._activity_forward_kineto_correlation(True)
                else:
                    C._activity_record_host_ops(True)
            if self._npu:
                C._activity_enable(True)
            self._start_info = {
                "start_monotonic_ns": time.monotonic_ns(),
                "realtime_minus_monotonic_ns": _clock_offset_ns(),
                "thread": threading.get_native_id(),
                # Where the device records' correlation ids come from (Note
                # [Profiler raw data]).
                "correlation": "kineto" if self._kineto_numbers_ops else "host_ops",
            }
            if self._kineto is not None:
                self._kineto.start_trace()
            self._started = True
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        C = torch_npu._C
        if C._activity_recording_host_ops():
            C._activity_record_host_ops(False)
        if C._activity_is_available():
            C._activity_forward_kineto_correlation(False)
        if self._npu:
            C._activity_enable(False)
        self._unclaim()

    def stop(self) -> RawRun:
        """Ends the window and returns what it collected."""
        if not self._started:
            raise RuntimeError("torch_npu.profiler: stop() without start()")
        C = torch_npu._C
        try:
            _synchronize_devices()
            if self._kineto is not None:
                self._kineto.stop_trace()
            end_info = {"end_monotonic_ns": time.monotonic_ns(), "realtime_minus_monotonic_ns": _clock_offset_ns()}
        finally:
            self._release()
            self._started = False
        device_records = C._activity_flush() if self._npu else []
        host_ops = C._activity_flush_host_ops()
        torch_trace = self._export_kineto() if self._kineto is not None else None
        self.finished_kineto, self._kineto = self._kineto, None
        info = {
            "config": {"common_config": self._common_config, "experimental_config": self._config.to_dict()},
            "start_info": self._start_info,
            "end_info": end_info,
            "torch_npu_version": getattr(torch_npu, "__version__", "unknown"),
            "torch_version": torch.__version__,
            "rank_id": _rank(),
            "pid": os.getpid(),
            "host_name": socket.gethostname(),
            "simulator": True,
        }
        metadata = {"ENV_VARIABLES": profiling_env()}
        metadata.update(self.metadata)
        return RawRun(info=info, metadata=metadata, torch_trace=torch_trace, host_ops=host_ops,
                      device_records=device_records)

    def _export_kineto(self) -> dict[str, Any]:
        fd, path = tempfile.mkstemp(prefix="torch_npu_profiler_", suffix=".json")
        os.close(fd)
        try:
            self._kineto.export_chrome_trace(path)
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        finally:
            os.unlink(path)
