"""A picture of a profiling result: a PNG and a self-contained HTML page.

    python -m torch_npu.profiler.run_summary RESULT [-o out.html] [--png out.png] [--top N]

RESULT is a ``*_ascend_pt`` directory whose ``ASCEND_PROFILER_OUTPUT`` has been
written (by ``tensorboard_trace_handler`` or by ``analyse``). The picture has
three panels, read from that directory's CSV files only:

- step time: per step, the device's computing, communication not overlapped
  with computing, and free time (``step_trace_time.csv``), stacked;
- top kernels: the ``--top`` kernel types by total device time
  (``op_statistic.csv``), the rest summed as "other";
- memory over time: memory allocated and reserved by PyTorch per device
  (``memory_record.csv``, written with ``profile_memory=True``); a panel that
  says so when the run did not record memory.

The page adds the numbers behind each panel as tables. matplotlib is an
optional dependency: ``pip install 'torch-npu-profiler[viz]'``.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ._html_report import INSTALL_HINT, escape, import_matplotlib, page, table
from .raw_data import OUTPUT_DIR

STEP_PARTS = ("Computing", "Communication(Not Overlapped)", "Free")
STEP_COLORS = ("#4c72b0", "#dd8452", "#c7c7c7")
OTHER = "other"


class ResultError(ValueError):
    """RESULT is not a profiling result whose output files can be read."""


@dataclass
class StepTime:
    device: str
    step: str
    parts: dict[str, float]  # microseconds, by STEP_PARTS


@dataclass
class KernelType:
    device: str
    name: str
    count: int
    total_us: float


@dataclass
class MemoryTrack:
    device: str
    times_us: list[float] = field(default_factory=list)
    allocated_mb: list[float] = field(default_factory=list)
    reserved_mb: list[float] = field(default_factory=list)


@dataclass
class RunSummary:
    """What a result's CSV files say, as the picture shows it."""

    result: Path
    steps: list[StepTime]
    kernels: list[KernelType]  # by total time, longest first
    memory: list[MemoryTrack]  # one per device; empty without profile_memory


def _read_csv(path: Path, required: Sequence[str]) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise ResultError(f"{path} lacks the column(s) {', '.join(missing)}: it was not written by "
                              f"torch_npu.profiler (or is damaged); run torch_npu.profiler.profiler.analyse on the "
                              f"result again")
        return list(reader)


def _float(row: dict[str, str], column: str) -> float:
    try:
        return float(row[column])
    except ValueError:
        return 0.0  # "N/A" and empty cells


def load_summary(result: str | os.PathLike[str]) -> RunSummary:
    """Reads the ``ASCEND_PROFILER_OUTPUT`` CSV files of ``result`` (a
    ``*_ascend_pt`` directory, or its ``ASCEND_PROFILER_OUTPUT`` itself)."""
    root = Path(result)
    output = root if root.name == OUTPUT_DIR else root / OUTPUT_DIR
    if not (output / "step_trace_time.csv").is_file() or not (output / "op_statistic.csv").is_file():
        raise ResultError(f"{root} is not an analysed profiling result: no {OUTPUT_DIR}/step_trace_time.csv and "
                          f"op_statistic.csv in it (pass a *_ascend_pt directory written by tensorboard_trace_handler; "
                          f"if it was written with analyse_flag=False, run torch_npu.profiler.profiler.analyse first)")
    steps = [StepTime(row["Device_id"], row["Step"], {p: _float(row, p) for p in STEP_PARTS})
             for row in _read_csv(output / "step_trace_time.csv", ("Device_id", "Step", *STEP_PARTS))]
    kernels = [KernelType(row["Device_id"], row["OP Type"], int(_float(row, "Count")), _float(row, "Total Time(us)"))
               for row in _read_csv(output / "op_statistic.csv", ("Device_id", "OP Type", "Count", "Total Time(us)"))]
    kernels.sort(key=lambda k: -k.total_us)
    tracks: dict[str, MemoryTrack] = {}
    memory_csv = output / "memory_record.csv"
    if memory_csv.is_file():
        columns = ("Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Device Type")
        for row in _read_csv(memory_csv, columns):
            track = tracks.setdefault(row["Device Type"], MemoryTrack(row["Device Type"]))
            track.times_us.append(_float(row, "Timestamp(us)"))
            track.allocated_mb.append(_float(row, "Total Allocated(MB)"))
            track.reserved_mb.append(_float(row, "Total Reserved(MB)"))
    return RunSummary(root, steps, kernels, list(tracks.values()))


def top_kernels(summary: RunSummary, top: int) -> list[tuple[str, float]]:
    """(kernel type, total µs) of the ``top`` longest types over all devices,
    then "other" with the rest when there is a rest."""
    totals: dict[str, float] = defaultdict(float)
    for k in summary.kernels:
        totals[k.name] += k.total_us
    ranked = sorted(totals.items(), key=lambda item: -item[1])
    rest = sum(t for _, t in ranked[top:])
    return ranked[:top] + ([(OTHER, rest)] if len(ranked) > top else [])


def _draw(summary: RunSummary, top: int, title: str) -> bytes:
    import_matplotlib("rendering a profiling result")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 11), dpi=100, layout="constrained")
    ax_steps, ax_kernels, ax_memory = fig.subplots(3, 1, gridspec_kw={"height_ratios": [1.1, 1.0, 1.0]})

    labels = [f"{s.step}" if len({x.device for x in summary.steps}) <= 1 else f"{s.step} (dev {s.device})"
              for s in summary.steps]
    bottom = [0.0] * len(summary.steps)
    for part, color in zip(STEP_PARTS, STEP_COLORS):
        values = [s.parts[part] / 1000.0 for s in summary.steps]
        ax_steps.bar(labels, values, bottom=bottom, color=color, label=part)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax_steps.set_title("step time on the device")
    ax_steps.set_xlabel("step")
    ax_steps.set_ylabel("ms")
    ax_steps.legend(loc="upper right", fontsize="small")
    if not summary.steps:
        ax_steps.text(0.5, 0.5, "no steps recorded", ha="center", va="center", transform=ax_steps.transAxes)

    ranked = top_kernels(summary, top)
    names = [name for name, _ in ranked][::-1]
    ax_kernels.barh(names, [t / 1000.0 for _, t in ranked][::-1], color="#55a868")
    ax_kernels.set_title(f"top {min(top, len(ranked))} kernel types by total device time")
    ax_kernels.set_xlabel("ms")
    if not ranked:
        ax_kernels.text(0.5, 0.5, "no kernels recorded", ha="center", va="center", transform=ax_kernels.transAxes)

    if summary.memory:
        start = min(t for track in summary.memory for t in track.times_us[:1])
        for track in summary.memory:
            seconds = [(t - start) / 1e6 for t in track.times_us]
            ax_memory.step(seconds, track.allocated_mb, where="post", label=f"{track.device} allocated")
            ax_memory.step(seconds, track.reserved_mb, where="post", linestyle="--", label=f"{track.device} reserved")
        ax_memory.set_xlabel("seconds since the first record")
        ax_memory.set_ylabel("MB")
        ax_memory.legend(loc="upper left", fontsize="small")
    else:
        ax_memory.text(0.5, 0.5, "memory was not recorded (profile with profile_memory=True)",
                       ha="center", va="center", transform=ax_memory.transAxes)
        ax_memory.set_axis_off()
    ax_memory.set_title("memory over time")
    fig.suptitle(title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _body(summary: RunSummary, top: int) -> str:
    parts = ["<h2>Step time (µs)</h2>",
             table(["device", "step", *STEP_PARTS],
                   ([escape(s.device), escape(s.step), *(f"{s.parts[p]:,.1f}" for p in STEP_PARTS)]
                    for s in summary.steps), numeric=(2, 3, 4)),
             "<h2>Kernel types by total device time</h2>",
             table(["kernel type", "total (µs)"],
                   ([escape(name), f"{total:,.1f}"] for name, total in top_kernels(summary, top)), numeric=(1,))]
    if summary.memory:
        parts.append("<h2>Memory peaks (MB)</h2>")
        parts.append(table(["device", "peak allocated", "peak reserved", "records"],
                           ([escape(t.device), f"{max(t.allocated_mb, default=0):,.3f}",
                             f"{max(t.reserved_mb, default=0):,.3f}", str(len(t.times_us))] for t in summary.memory),
                           numeric=(1, 2, 3)))
    else:
        parts.append('<p class="note">Memory was not recorded (profile with profile_memory=True).</p>')
    return "\n".join(parts)


def render_result(result: str | os.PathLike[str], html_path: str | os.PathLike[str],
                  png_path: str | os.PathLike[str], top: int = 10) -> RunSummary:
    """Writes the PNG and the HTML page of ``result``; returns what they show.
    Raises :class:`ResultError` when ``result`` is not an analysed result."""
    if top < 1:
        raise ValueError(f"top must be 1 or more, got {top}")
    summary = load_summary(result)
    title = f"profiling result {summary.result.name}"
    png = _draw(summary, top, title)
    Path(png_path).write_bytes(png)
    Path(html_path).write_text(page(title, png, "step time, top kernels and memory over time",
                                    _body(summary, top)), encoding="utf-8")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; 0 on success, 1 when RESULT cannot be rendered."""
    parser = argparse.ArgumentParser(
        prog="python -m torch_npu.profiler.run_summary",
        description="Render a torch_npu.profiler result (a *_ascend_pt directory) as a PNG and an HTML page: "
                    "step time breakdown, top kernels, memory over time.",
        epilog=f"Needs matplotlib: {INSTALL_HINT}")
    parser.add_argument("result", help="a *_ascend_pt directory with ASCEND_PROFILER_OUTPUT")
    parser.add_argument("-o", "--output", help="the HTML page (default: RESULT_NAME.html here)")
    parser.add_argument("--png", help="the PNG (default: the HTML path with .png)")
    parser.add_argument("--top", type=int, default=10, help="kernel types shown (default 10)")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error("--top must be 1 or more")
    html_path = Path(args.output) if args.output else Path(Path(args.result).resolve().name + ".html")
    png_path = Path(args.png) if args.png else html_path.with_suffix(".png")
    try:
        summary = render_result(args.result, html_path, png_path, top=args.top)
    except (ResultError, OSError, ImportError) as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {html_path} and {png_path}: {len(summary.steps)} step(s), "
          f"{len(summary.kernels)} kernel type row(s), memory of {len(summary.memory)} device(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
