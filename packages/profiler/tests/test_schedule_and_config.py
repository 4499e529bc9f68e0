"""The step schedule (Ascend's argument order), the profile state machine
that follows it, and the checks of _ExperimentalConfig."""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_npu
from torch_npu.profiler import (AiCMetrics, ExportType, ProfilerAction, ProfilerActivity, ProfilerLevel,
                                _ExperimentalConfig, profile, schedule)

A = ProfilerAction


def test_schedule_actions_follow_skip_first_wait_warmup_active_repeat():
    s = schedule(wait=1, active=2, warmup=1, repeat=2, skip_first=2)
    actions = [s(step) for step in range(12)]
    assert actions == [A.NONE, A.NONE,  # skip_first
                       A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE,  # cycle 1
                       A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE,  # cycle 2
                       A.NONE, A.NONE]  # repeat=2 done


def test_schedule_positional_order_is_wait_active_warmup():
    s = schedule(0, 1, 1)
    assert [s(step) for step in range(4)] == [A.WARMUP, A.RECORD_AND_SAVE, A.WARMUP, A.RECORD_AND_SAVE]


def test_schedule_with_repeat_zero_cycles_forever():
    s = schedule(wait=0, active=1)
    assert all(s(step) is A.RECORD_AND_SAVE for step in range(50))


@pytest.mark.parametrize("bad", [dict(wait=-1, active=1), dict(wait=0, active=1, warmup=-2),
                                 dict(wait=0, active=1, repeat=-1), dict(wait=0, active=1, skip_first=-3)])
def test_negative_numbers_are_rejected(bad):
    with pytest.raises(ValueError, match="must be >= 0"):
        schedule(**bad)


def test_active_must_be_positive_and_numbers_ints():
    with pytest.raises(ValueError, match="active must be >= 1"):
        schedule(wait=1, active=0)
    with pytest.raises(TypeError, match="must be an int"):
        schedule(wait=1.5, active=1)


def test_on_trace_ready_runs_when_each_active_cycle_ends():
    ready_at = []
    recorded_steps = []

    def handler(prof):
        ready_at.append(prof.step_num)
        events = prof.raw_run.torch_trace["traceEvents"]
        names = [e["name"] for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
        recorded_steps.append(sorted(int(n.split("#")[1]) for n in names))

    x = torch.ones(8, device="npu")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU],
                 schedule=schedule(wait=1, active=2, warmup=1, repeat=2, skip_first=1),
                 on_trace_ready=handler) as prof:
        for _ in range(12):
            x.add_(1)
            prof.step()
    # skip 0; cycle 1 waits at 1, warms up at 2, records 3-4; cycle 2 records 7-8.
    assert ready_at == [5, 9]
    assert recorded_steps == [[3, 4], [7, 8]]
    assert not torch_npu._C._activity_recording_host_ops()


def test_stop_during_active_steps_saves_the_partial_cycle():
    ready = []
    with profile(schedule=schedule(wait=0, active=5), on_trace_ready=ready.append) as prof:
        torch.ones(4, device="npu").add_(1)
        prof.step()
    assert len(ready) == 1 and ready[0].raw_run.device_records


def test_two_profiles_at_once_is_a_clear_error():
    with profile(activities=[ProfilerActivity.NPU]):
        with pytest.raises(RuntimeError, match="is profiling"):
            with profile(activities=[ProfilerActivity.NPU]):
                pass


def test_experimental_config_accepts_the_documented_parameters():
    config = _ExperimentalConfig(profiler_level=ProfilerLevel.Level1, aic_metrics=AiCMetrics.PipeUtilization,
                                 export_type=[ExportType.Text], data_simplification=False, record_op_args=False,
                                 l2_cache=False, msprof_tx=False, mstx=True, op_attr=False,
                                 gc_detect_threshold=10, host_sys=["cpu", "mem"], sys_io=False,
                                 sys_interconnection=False, mstx_domain_include=["default"])
    assert config.to_dict()["_aic_metrics"] == "ACL_AICORE_PIPE_UTILIZATION"
    assert _ExperimentalConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()


def test_supported_sets_are_what_the_config_takes():
    from torch_npu.profiler import supported_ai_core_metrics, supported_export_type, supported_profiler_level

    assert supported_profiler_level() == {ProfilerLevel.Level_none, ProfilerLevel.Level0, ProfilerLevel.Level1,
                                          ProfilerLevel.Level2}
    assert len(supported_ai_core_metrics()) == 9 and AiCMetrics.L2Cache in supported_ai_core_metrics()
    assert supported_export_type() == {ExportType.Text}
    for level in supported_profiler_level():
        for metric in supported_ai_core_metrics():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a metric below Level1 is reset, with a warning
                _ExperimentalConfig(profiler_level=level, aic_metrics=metric)
    for export in supported_export_type():
        assert _ExperimentalConfig(export_type=[export]).export_type == [export]
    for export in set(ExportType) - supported_export_type():
        with pytest.raises(ValueError, match="not supported"):
            _ExperimentalConfig(export_type=[export])


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(profiler_level="Level9"), ValueError, "profiler_level='Level9' is not one of"),
    (dict(aic_metrics="Everything"), ValueError, "aic_metrics"),
    (dict(export_type=ExportType.Db), ValueError, "not supported"),
    (dict(export_type="csv"), ValueError, "export_type"),
    (dict(l2_cache="yes"), TypeError, "l2_cache must be True or False"),
    (dict(gc_detect_threshold=-1), ValueError, "gc_detect_threshold must be >= 0"),
    (dict(gc_detect_threshold="1"), TypeError, "gc_detect_threshold"),
    (dict(host_sys="cpu"), TypeError, "host_sys must be a list"),
    (dict(host_sys=["gpu"]), ValueError, "host_sys"),
    (dict(no_such_option=True), TypeError, "unknown parameter"),
])
def test_bad_experimental_config_values_are_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        _ExperimentalConfig(**kwargs)


def test_mstx_domain_include_wins_over_exclude():
    with pytest.warns(UserWarning, match="mstx_domain_include applies"):
        config = _ExperimentalConfig(mstx=True, mstx_domain_include=["a"], mstx_domain_exclude=["b"])
    assert config.mstx_domain_shown("a") and not config.mstx_domain_shown("b") and not config.mstx_domain_shown("c")


def test_aic_metrics_at_level0_is_reset_with_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = _ExperimentalConfig(profiler_level=ProfilerLevel.Level0, aic_metrics=AiCMetrics.Memory)
    assert config.aic_metrics is AiCMetrics.AiCoreNone
    assert any("Level1 or Level2" in str(w.message) for w in caught)


def test_bad_profile_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="ProfilerActivity members"):
        profile(activities=[torch.profiler.ProfilerActivity.CPU])
    with pytest.raises(TypeError, match="experimental_config"):
        profile(experimental_config={"profiler_level": "Level1"})
    with pytest.raises(TypeError, match="record_shapes"):
        profile(record_shapes=1)
