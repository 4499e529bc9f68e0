"""``torch_npu.profiler.tensorboard_trace_handler``: writes each recording
into its own ``{worker_name}_{timestamp}_ascend_pt`` directory, the worker
name being ``{hostname}_{pid}`` unless given (as Ascend documents)."""

from __future__ import annotations

import os
import socket
import warnings
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .analysis import write_output
from .raw_data import write_raw

if TYPE_CHECKING:
    from .profiler import profile

_MAX_WORKER_NAME_LENGTH = 226


def _make_result_dir(base: Path, worker_name: str | None) -> Path:
    """Creates and returns a new result directory under ``base``."""
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
    stamp = datetime.now().strftime("%Y%m%d%H%M%S%f")[:-3]
    suffix = 0
    while True:
        # Two recordings of one worker name within a millisecond (in this
        # process or another): the later takes a suffix. mkdir decides, so
        # two processes never share a directory.
        path = base / f"{worker}_{stamp}{suffix or ''}_ascend_pt"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            suffix += 1


def tensorboard_trace_handler(dir_name: str | os.PathLike[str] | None = None, worker_name: str | None = None,
                              analyse_flag: bool = True) -> Callable[[profile], None]:
    """The ``on_trace_ready`` handler that writes a result directory under
    ``dir_name`` (default: ``$ASCEND_WORK_PATH/profiling_data``, else the
    current directory): raw data, and with ``analyse_flag`` the files of
    ASCEND_PROFILER_OUTPUT (else run ``analyse`` on it later). A directory that
    cannot be written gives a warning; training goes on."""
    if dir_name is None or dir_name == "":
        work_path = os.environ.get("ASCEND_WORK_PATH")
        dir_name = os.path.join(work_path, "profiling_data") if work_path else os.getcwd()
    if not isinstance(dir_name, (str, os.PathLike)):
        raise TypeError(f"tensorboard_trace_handler: dir_name must be a path, got {dir_name!r}")
    if worker_name is not None:
        if not isinstance(worker_name, str) or not worker_name:
            raise TypeError(f"tensorboard_trace_handler: worker_name must be a non-empty string, got {worker_name!r}")
        if os.sep in worker_name or len(worker_name) > _MAX_WORKER_NAME_LENGTH:
            raise ValueError(f"tensorboard_trace_handler: worker_name {worker_name!r} must not contain "
                             f"'{os.sep}' and must be at most {_MAX_WORKER_NAME_LENGTH} characters")
    if not isinstance(analyse_flag, bool):
        raise TypeError(f"tensorboard_trace_handler: analyse_flag must be True or False, got {analyse_flag!r}")
    base = Path(dir_name).expanduser().absolute()

    def handler(prof: profile) -> None:
        run = prof.raw_run
        if run is None:
            return
        try:
            base.mkdir(parents=True, exist_ok=True)
            result_dir = _make_result_dir(base, worker_name)
            write_raw(run, result_dir)
            if analyse_flag:
                write_output(run, result_dir)
        except OSError as e:
            warnings.warn(f"torch_npu.profiler: could not write the profiling result under {base} ({e}); "
                          "this recording is lost, training goes on", RuntimeWarning, stacklevel=2)

    return handler
