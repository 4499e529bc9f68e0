"""``torch_npu.profiler.dynamic_profile``: start a collection in a running
training by editing a file.

    from torch_npu.profiler import dynamic_profile as dp
    dp.init("./prof_cfg")          # writes ./prof_cfg/profiler_config.json if absent
    for batch in loader:
        train_step(batch)
        dp.step()

Editing ``profiler_config.json`` while the training runs starts one
collection; with ``PROF_CONFIG_PATH=<dir>`` in the environment the same
happens without code changes, steps being counted from optimizer steps.

Note [dynamic_profile triggers]
The controller looks at the file only from step(), at most every
``POLL_INTERVAL_NS`` (one clock read per step otherwise, one stat() per
interval): a change of the file's (mtime, size, inode) since the last look
is an edit. An edit is read and validated; a malformed or half-written file
gives a RuntimeWarning and is otherwise ignored (its completed version is a
later change and triggers). A valid edit while idle arms one collection:
warmup then active steps from ``start_step``, or from the next step when
start_step is 0 or already passed, written by tensorboard_trace_handler into
prof_dir. An edit during a collection is kept and armed when it ends. The
state as init() found it (the template, or a file already there) never
triggers. All ranks of a node watch the same file; ``is_rank``/``rank_list``
choose which collect. A dynamic collection is a ``profile`` started at the
training's step number, so the process-wide rule that one profiling mode
collects at a time (collector.py) covers it in both directions.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from pathlib import Path

import torch

from .dynamic_config import CONFIG_FILE, ConfigError, DynamicConfig, parse_config, template_text
from .profiler import profile
from .scheduler import Schedule
from .trace_handler import tensorboard_trace_handler

__all__ = ["init", "start", "step"]

ENV_CONFIG_PATH = "PROF_CONFIG_PATH"
POLL_INTERVAL_NS = 200_000_000  # how often step() looks at the file


def _rank() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", "0"))


def _file_state(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _write_template(path: Path) -> None:
    """Creates ``path`` with the template unless it exists; atomic and never
    clobbering, since all ranks of a node may call init at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{threading.get_native_id()}.tmp"
    tmp.write_text(template_text(), encoding="utf-8")
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()


class _DynamicProfiler:
    """The process's controller (Note [dynamic_profile triggers])."""

    def __init__(self) -> None:
        self.config_path: Path | None = None
        self.step_num = 0  # the step now running: the number of step() calls so far
        self._seen: tuple[int, int, int] | None = None
        self._next_poll_ns = 0
        self._pending: DynamicConfig | None = None
        self._start_step = 0
        self._prof: profile | None = None
        self._end_step = 0
        self._lock = threading.Lock()

    @property
    def collecting(self) -> bool:
        return self._prof is not None

    def init(self, path: str | os.PathLike[str]) -> None:
        if self.config_path is not None:
            warnings.warn(f"dynamic_profile.init: already watching {self.config_path}; init({str(path)!r}) is "
                          "ignored", RuntimeWarning, stacklevel=3)
            return
        directory = Path(path).expanduser().absolute()
        if directory.suffix == ".json":
            raise ValueError(f"dynamic_profile.init: pass the directory that holds {CONFIG_FILE}, got the file "
                             f"{directory}")
        config_path = directory / CONFIG_FILE
        try:
            if not config_path.exists():
                _write_template(config_path)
        except OSError as e:
            warnings.warn(f"dynamic_profile.init: cannot write the template {config_path} ({e}); create the file "
                          "yourself to profile", RuntimeWarning, stacklevel=3)
        self._seen = _file_state(config_path)
        self.config_path = config_path
        self._next_poll_ns = time.monotonic_ns() + POLL_INTERVAL_NS

    def start(self, config_path: str | os.PathLike[str] | None = None) -> None:
        """Arms one collection from ``config_path`` (a profiler_config.json;
        default: the watched one) at the next step boundary."""
        path = Path(config_path).expanduser().absolute() if config_path is not None else self.config_path
        if path is None:
            raise RuntimeError("dynamic_profile.start: no config file; call dynamic_profile.init(dir) first or "
                               "pass the path of a profiler_config.json")
        try:
            config = parse_config(path.read_text(encoding="utf-8"), path.parent)
        except (OSError, ConfigError) as e:
            raise ValueError(f"dynamic_profile.start: {path}: {e}") from e
        with self._lock:
            self._arm(config, earliest=self.step_num + 1)  # the running step has begun

    def step(self) -> None:
        with self._lock:
            self.step_num += 1
            if self._prof is not None:
                try:
                    self._prof.step()
                except BaseException:
                    self._abandon()  # e.g. another profiling mode started collecting meanwhile
                    raise
                if self.step_num >= self._end_step:
                    self._finish()
            if self.config_path is not None:
                now = time.monotonic_ns()
                if now >= self._next_poll_ns:
                    self._next_poll_ns = now + POLL_INTERVAL_NS
                    self._poll()
            if self._prof is None and self._pending is not None and self.step_num >= self._start_step:
                self._begin()

    def _poll(self) -> None:
        state = _file_state(self.config_path)
        if state is None or state == self._seen:
            return
        self._seen = state
        try:
            config = parse_config(self.config_path.read_text(encoding="utf-8"), self.config_path.parent)
        except (OSError, UnicodeDecodeError, ConfigError) as e:
            warnings.warn(f"dynamic_profile: {self.config_path} cannot be used ({e}); no collection starts, "
                          "training goes on (a later valid edit is picked up)", RuntimeWarning, stacklevel=4)
            return
        self._arm(config, earliest=self.step_num)  # called as step `step_num` begins

    def _arm(self, config: DynamicConfig, earliest: int) -> None:
        if not config.profiles_rank(_rank()):
            return
        first = earliest if self._prof is None else max(earliest, self._end_step)
        if config.start_step > 0 and config.start_step < first:
            warnings.warn(f"dynamic_profile: start_step {config.start_step} has passed (the training is at step "
                          f"{self.step_num}); collecting from step {first}", RuntimeWarning, stacklevel=4)
        self._pending = config
        self._start_step = max(first, config.start_step)

    def _begin(self) -> None:
        config, self._pending = self._pending, None
        prof = profile(
            activities=config.activities,
            schedule=Schedule(wait=0, active=config.active, warmup=config.warmup, repeat=1,
                              skip_first=self.step_num),
            on_trace_ready=tensorboard_trace_handler(config.prof_dir, analyse_flag=config.analyse),
            record_shapes=config.record_shapes, profile_memory=config.profile_memory,
            with_stack=config.with_stack, with_flops=config.with_flops, with_modules=config.with_modules,
            experimental_config=config.experimental_config)
        prof._session_name = "dynamic_profile"
        for key, value in config.metadata.items():
            prof._metadata[str(key)] = value
        self._prof = prof
        try:
            prof._start_from(self.step_num)
        except BaseException:
            self._abandon()
            raise
        self._end_step = self.step_num + config.warmup + config.active

    def _finish(self) -> None:
        prof, self._prof = self._prof, None
        prof.stop()

    def _abandon(self) -> None:
        prof, self._prof = self._prof, None
        try:
            prof.stop()
        except RuntimeError:
            pass  # the error being raised already says what went wrong

    def _reset(self) -> None:
        """Forgets everything (tests; a process restarting its training)."""
        with self._lock:
            if self._prof is not None:
                self._finish()
            self.__init__()


_controller = _DynamicProfiler()


def init(path: str | os.PathLike[str]) -> None:
    """Starts watching ``path/profiler_config.json`` (written from the template
    when absent). Edit the file while training runs to collect; see
    Note [dynamic_profile triggers] and README.md for its keys."""
    _controller.init(path)


def step() -> None:
    """Ends a training step: call it once per step."""
    _controller.step()


def start(config_path: str | os.PathLike[str] | None = None) -> None:
    """Collects once with the settings of ``config_path`` (a
    profiler_config.json), from the next step on (or its start_step)."""
    _controller.start(config_path)


def _optimizer_step_hook(optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
    _controller.step()


def init_from_environment() -> bool:
    """With ``PROF_CONFIG_PATH=<dir>``: watch that directory and count each
    optimizer step as a training step (a global optimizer step hook). Called
    when torch_npu loads the profiler plugin. Returns whether it did."""
    path = os.environ.get(ENV_CONFIG_PATH)
    if not path:
        return False
    from torch.optim.optimizer import register_optimizer_step_post_hook

    _controller.init(path)
    register_optimizer_step_post_hook(_optimizer_step_hook)
    return True
