"""dynamic_profile: collections started by editing profiler_config.json while
training runs (twice in one run), bad configs, PROF_CONFIG_PATH without code
changes, and the rule that two profiling modes never collect at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.profiler import ProfilerActivity, dynamic_profile, profile, schedule
from torch_npu.profiler.dynamic_config import CONFIG_FILE, TEMPLATE


@pytest.fixture
def dp(monkeypatch):
    """The module with a fresh controller that looks at the file every step."""
    monkeypatch.setattr(dynamic_profile, "POLL_INTERVAL_NS", 0)
    dynamic_profile._controller._reset()
    yield dynamic_profile
    dynamic_profile._controller._reset()


def write_config(config_dir: Path, **changes) -> None:
    config = json.loads(json.dumps(TEMPLATE))
    config.update(changes)
    path = config_dir / CONFIG_FILE
    text = json.dumps(config)
    # A distinct size each time, so that the edit shows even where mtimes are coarse.
    path.write_text(text + " " * (len(path.read_text()) % 7 + 1) if path.exists() else text)


def result_dirs(prof_dir: Path) -> list[Path]:
    return sorted(prof_dir.glob("*_ascend_pt"), key=lambda p: p.name)


def recorded_steps(result: Path) -> list[int]:
    trace = json.loads((result / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    return sorted(int(e["name"].split("#")[1]) for e in trace
                  if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#"))


def one_step(x: torch.Tensor) -> None:
    (x * 2).sum().item()


def test_init_writes_the_template_and_it_does_not_trigger(dp, tmp_path):
    dp.init(tmp_path / "cfg")
    config = json.loads((tmp_path / "cfg" / CONFIG_FILE).read_text())
    for key in ("activities", "prof_dir", "analyse", "record_shapes", "profile_memory", "with_stack", "with_flops",
                "with_modules", "active", "warmup", "start_step", "is_rank", "rank_list", "experimental_config"):
        assert key in config
    x = torch.ones(4, device="npu")
    for _ in range(3):
        one_step(x)
        dp.step()
    assert not dp._controller.collecting and not list(tmp_path.rglob("*_ascend_pt"))


def test_two_edits_give_two_collections_of_the_right_steps(dp, tmp_path):
    cfg, out = tmp_path / "cfg", tmp_path / "out"
    dp.init(cfg)
    x = torch.ones(4, device="npu")
    for step in range(16):  # the step running is `step`
        if step == 2:
            write_config(cfg, prof_dir=str(out), analyse=True, active=2, start_step=5)
        if step == 9:
            write_config(cfg, prof_dir=str(out), analyse=True, active=1, warmup=1)  # from the next step
        one_step(x)
        dp.step()
    results = result_dirs(out)
    assert len(results) == 2
    assert recorded_steps(results[0]) == [5, 6]
    # warmup step 10 is not recorded; step 11 is.
    assert recorded_steps(results[1]) == [11]
    kernels = (results[0] / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").read_text()
    assert "aten::mul" in kernels


def test_malformed_then_valid_config(dp, tmp_path):
    cfg, out = tmp_path / "cfg", tmp_path / "out"
    dp.init(cfg)
    x = torch.ones(4, device="npu")
    path = cfg / CONFIG_FILE
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path.write_text('{"activities": ["CPU", "NPU"], "prof_dir": ')  # half-written
        one_step(x)
        dp.step()
        path.write_text(json.dumps(dict(TEMPLATE, active="two")))  # valid JSON, bad value
        one_step(x)
        dp.step()
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("not valid JSON" in m for m in messages), messages
    assert any("active must be an integer" in m for m in messages), messages
    assert not dp._controller.collecting
    write_config(cfg, prof_dir=str(out), analyse=True, active=1)
    for _ in range(3):
        one_step(x)
        dp.step()
    assert len(result_dirs(out)) == 1


def test_start_collects_once_from_a_given_file(dp, tmp_path):
    out = tmp_path / "out"
    config = tmp_path / "start" / CONFIG_FILE
    config.parent.mkdir()
    config.write_text(json.dumps(dict(TEMPLATE, prof_dir=str(out), analyse=True, active=2)))
    x = torch.ones(4, device="npu")
    for step in range(6):
        if step == 1:
            dp.start(config)  # from the next step: 2 and 3
        one_step(x)
        dp.step()
    assert [recorded_steps(r) for r in result_dirs(out)] == [[2, 3]]
    config.write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        dp.start(config)


def test_rank_filter(dp, tmp_path, monkeypatch):
    cfg, out = tmp_path / "cfg", tmp_path / "out"
    monkeypatch.setenv("RANK", "3")
    dp.init(cfg)
    write_config(cfg, prof_dir=str(out), analyse=True, is_rank=True, rank_list=[0, 1])
    x = torch.ones(4, device="npu")
    for _ in range(3):
        one_step(x)
        dp.step()
    assert not result_dirs(out)


def test_two_modes_at_once_are_an_error(dp, tmp_path):
    cfg, out = tmp_path / "cfg", tmp_path / "out"
    dp.init(cfg)
    x = torch.ones(4, device="npu")
    write_config(cfg, prof_dir=str(out), analyse=False, active=3)
    dp.step()  # collecting from the next step on
    assert dp._controller.collecting
    with pytest.raises(RuntimeError, match="dynamic_profile is profiling"):
        with profile(activities=[ProfilerActivity.NPU]):
            pass
    for _ in range(4):
        one_step(x)
        dp.step()
    assert len(result_dirs(out)) == 1 and not dp._controller.collecting
    # The reverse: a profile collecting when the edit's collection would start.
    with profile(activities=[ProfilerActivity.NPU]):
        write_config(cfg, prof_dir=str(out), analyse=False, active=1)
        with pytest.raises(RuntimeError, match="torch_npu.profiler.profile is profiling"):
            dp.step()
    assert not dp._controller.collecting
    one_step(x)
    dp.step()  # training goes on
    # Also while one of them only warms up (torch's profiler is prepared then).
    with profile(activities=[ProfilerActivity.CPU]):
        write_config(cfg, prof_dir=str(out), analyse=False, warmup=1, active=1)
        with pytest.raises(RuntimeError, match="torch_npu.profiler.profile is profiling"):
            dp.step()
    with profile(schedule=schedule(wait=0, warmup=2, active=1)) as prof:
        write_config(cfg, prof_dir=str(out), analyse=False, active=1)
        with pytest.raises(RuntimeError, match="torch_npu.profiler.profile is profiling"):
            dp.step()
        prof.step()
    assert not dp._controller.collecting


def test_prof_config_path_counts_optimizer_steps(tmp_path):
    cfg, out = tmp_path / "cfg", tmp_path / "out"
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import json, pathlib
        import torch, torch_npu
        from torch_npu.profiler import dynamic_profile
        dynamic_profile.POLL_INTERVAL_NS = 0
        config = pathlib.Path({str(cfg)!r}) / "profiler_config.json"
        assert config.is_file()  # written when torch_npu loaded the profiler
        model = torch.nn.Linear(4, 2).npu()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(8):
            if step == 1:
                data = json.loads(config.read_text())
                data.update(prof_dir={str(out)!r}, analyse=True, active=2, start_step=3)
                config.write_text(json.dumps(data))
            model(torch.ones(3, 4).npu()).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
        print("done")
    """))
    env = dict(os.environ, PROF_CONFIG_PATH=str(cfg))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "failed to load" not in proc.stderr, proc.stderr
    results = result_dirs(out)
    assert len(results) == 1
    assert recorded_steps(results[0]) == [3, 4]
