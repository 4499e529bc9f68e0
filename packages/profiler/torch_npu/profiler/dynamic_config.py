"""``profiler_config.json``, the file dynamic_profile watches: its template
and its validation into the arguments of one ``profile``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from .activity import ProfilerActivity
from .experimental_config import _ExperimentalConfig

CONFIG_FILE = "profiler_config.json"

# The keys Ascend documents for profiler_config.json, with the values of the
# template init() writes (collection is off until the file is edited).
TEMPLATE: dict[str, Any] = {
    "activities": ["CPU", "NPU"],
    "prof_dir": "./",
    "analyse": False,
    "record_shapes": False,
    "profile_memory": False,
    "with_stack": False,
    "with_flops": False,
    "with_modules": False,
    "active": 1,
    "warmup": 0,
    "start_step": 0,
    "is_rank": False,
    "rank_list": [],
    "experimental_config": {
        "profiler_level": "Level0",
        "aic_metrics": "AiCoreNone",
        "l2_cache": False,
        "op_attr": False,
        "gc_detect_threshold": None,
        "data_simplification": True,
        "record_op_args": False,
        "export_type": ["text"],
        "mstx": False,
        "mstx_domain_include": [],
        "mstx_domain_exclude": [],
        "host_sys": [],
        "sys_io": False,
        "sys_interconnection": False,
    },
    "metadata": {},
}

_BOOL_KEYS = ("analyse", "record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules", "is_rank")


class ConfigError(ValueError):
    """profiler_config.json cannot be used (malformed, half-written, or a bad value)."""


@dataclass
class DynamicConfig:
    """One validated profiler_config.json."""

    activities: set[ProfilerActivity]
    prof_dir: str
    analyse: bool
    record_shapes: bool
    profile_memory: bool
    with_stack: bool
    with_flops: bool
    with_modules: bool
    active: int
    warmup: int
    start_step: int
    is_rank: bool
    rank_list: list[int]
    experimental_config: _ExperimentalConfig
    metadata: dict[str, Any] = field(default_factory=dict)

    def profiles_rank(self, rank: int) -> bool:
        """Whether this process (``rank``) collects: all ranks unless is_rank."""
        return not self.is_rank or rank in self.rank_list


def template_text() -> str:
    return json.dumps(TEMPLATE, indent=4) + "\n"


def _int(data: dict[str, Any], key: str, minimum: int) -> int:
    value = data.get(key, TEMPLATE[key])
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{key} must be an integer >= {minimum}, got {value!r}")
    return value


def parse_config(text: str, config_dir: str | os.PathLike[str]) -> DynamicConfig:
    """Validates the text of profiler_config.json; a relative prof_dir is taken
    relative to the directory holding the file. Raises ConfigError."""
    if not text.strip():
        raise ConfigError("the file is empty (still being written?)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"not valid JSON ({e}); half-written?") from e
    if not isinstance(data, dict):
        raise ConfigError(f"the top level must be a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(TEMPLATE))
    if unknown:
        raise ConfigError(f"unknown keys {unknown}; the keys are {sorted(TEMPLATE)}")
    flags = {}
    for key in _BOOL_KEYS:
        value = data.get(key, TEMPLATE[key])
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {value!r}")
        flags[key] = value
    names = data.get("activities", TEMPLATE["activities"])
    if not isinstance(names, list) or not names or any(n not in ("CPU", "NPU") for n in names):
        raise ConfigError(f'activities must be a non-empty list of "CPU" and "NPU", got {names!r}')
    activities = {ProfilerActivity.CPU if n == "CPU" else ProfilerActivity.NPU for n in names}
    prof_dir = data.get("prof_dir", TEMPLATE["prof_dir"])
    if not isinstance(prof_dir, str) or not prof_dir:
        raise ConfigError(f"prof_dir must be a non-empty path string, got {prof_dir!r}")
    prof_dir = os.path.join(os.fspath(config_dir), os.path.expanduser(prof_dir))
    rank_list = data.get("rank_list", [])
    if not isinstance(rank_list, list) or any(isinstance(r, bool) or not isinstance(r, int) or r < 0
                                              for r in rank_list):
        raise ConfigError(f"rank_list must be a list of ranks (integers >= 0), got {rank_list!r}")
    experimental = data.get("experimental_config", {})
    if not isinstance(experimental, dict):
        raise ConfigError(f"experimental_config must be an object, got {experimental!r}")
    try:
        experimental_config = _ExperimentalConfig(**experimental)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"experimental_config: {e}") from e
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        raise ConfigError(f"metadata must be an object, got {metadata!r}")
    return DynamicConfig(activities=activities, prof_dir=prof_dir, active=_int(data, "active", 1),
                         warmup=_int(data, "warmup", 0), start_step=_int(data, "start_step", -1),
                         rank_list=rank_list, experimental_config=experimental_config, metadata=metadata, **flags)
