"""The picture of a profiling result (python -m torch_npu.profiler.run_summary):
what it shows equals the result's CSV files, and a directory that is not an
analysed result is refused with a message saying what to pass."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.profiler import (ProfilerActivity, ProfilerLevel, _ExperimentalConfig, profile, schedule,
                                tensorboard_trace_handler)
from torch_npu.profiler.run_summary import ResultError, main, render_result, top_kernels



@pytest.fixture(scope="module")
def result(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("summary")
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).npu()
    x = torch.randn(4, 8).npu()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU], schedule=schedule(wait=0, active=3, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(out),
                 experimental_config=_ExperimentalConfig(profiler_level=ProfilerLevel.Level0),
                 profile_memory=True) as prof:
        for _ in range(3):
            model(x).sum().backward()
            prof.step()
    (run,) = out.iterdir()
    return run


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_the_picture_shows_what_the_csv_files_say(result, tmp_path):
    html, png = tmp_path / "run.html", tmp_path / "run.png"
    summary = render_result(result, html, png, top=3)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = html.read_text()
    assert "data:image/png;base64," in page

    output = result / "ASCEND_PROFILER_OUTPUT"
    steps = rows(output / "step_trace_time.csv")
    assert [s.step for s in summary.steps] == [row["Step"] for row in steps] and len(steps) == 3
    assert [s.parts["Computing"] for s in summary.steps] == [float(row["Computing"]) for row in steps]

    statistic = rows(output / "op_statistic.csv")
    ranked = top_kernels(summary, 3)
    assert len(ranked) == min(3, len(statistic)) + (1 if len(statistic) > 3 else 0)
    assert sum(total for _, total in ranked) == pytest.approx(sum(float(r["Total Time(us)"]) for r in statistic))
    longest = max(statistic, key=lambda r: float(r["Total Time(us)"]))
    assert ranked[0][0] == longest["OP Type"] and longest["OP Type"] in page

    memory = rows(output / "memory_record.csv")
    (track,) = summary.memory
    assert max(track.allocated_mb) == max(float(r["Total Allocated(MB)"]) for r in memory) > 0


def test_the_command_line_writes_both_files_and_refuses_a_non_result(result, tmp_path, capsys):
    html = tmp_path / "out.html"
    assert main([str(result), "-o", str(html)]) == 0
    assert html.is_file() and html.with_suffix(".png").is_file()
    assert main([str(tmp_path), "-o", str(tmp_path / "x.html")]) == 1
    assert "is not an analysed profiling result" in capsys.readouterr().err
    with pytest.raises(ResultError, match="analyse"):
        render_result(tmp_path, tmp_path / "y.html", tmp_path / "y.png")
