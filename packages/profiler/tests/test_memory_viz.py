"""torch_npu.profiler.memory_viz: a memory snapshot in torch.cuda's format as a
PNG and a self-contained HTML page.

The snapshots are built here in the format of ``torch.cuda.memory._snapshot()``
(no accelerator is needed); torch's own ``torch.cuda._memory_viz`` reads them
too, which keeps the fixture honest.
"""

from __future__ import annotations

import base64
import copy
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from torch_npu.profiler import memory_viz as mv

MiB = 2**20
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# ---------------------------------------------------------------------------
# A realistic snapshot of device 0 (with a trace) and device 1 (segments only)
# ---------------------------------------------------------------------------

TORCH_LINEAR = "/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py"
ALLOCATOR_CPP = "/pytorch/c10/cuda/CUDACachingAllocator.cpp"


def frame(filename: str, line: int, name: str) -> Dict[str, Any]:
    return {"filename": filename, "line": line, "name": name}


def stack(line: int, name: str, filename: str = "/home/user/train.py") -> List[Dict[str, Any]]:
    """A stack as the allocator records it, innermost frame first: the C++
    allocator, torch's Python, then the user's code (the allocation site)."""
    return [frame(ALLOCATOR_CPP, 1150, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"),
            frame(TORCH_LINEAR, 125, "forward"),
            frame(filename, line, name),
            frame("/home/user/train.py", 90, "main")]


WEIGHTS = stack(12, "__init__", "/home/user/model.py")  # "__init__ (user/model.py:12)"
ACT1 = stack(42, "forward")  # "forward (user/train.py:42)"
TMP = stack(43, "forward")  # "forward (user/train.py:43)": the largest peak
LOSS = stack(50, "compute_loss")
SMALL = stack(60, "step")
EVAL = stack(70, "evaluate")
EARLY = stack(5, "setup", "/home/user/setup_model.py")  # before the trace started
OOM_STACK = stack(44, "forward")

SEG_A, SEG_B, SEG_C, SEG_D, SEG_E = (0x7F0000000000, 0x7F0001400000, 0x7F0002000000,
                                     0x7F0004000000, 0x7F0006000000)

PEAK_ALLOCATED = 1024 + 8 * MiB + 16 * MiB + 24 * MiB  # after the 24 MiB temporary
PEAK_RESERVED = 2 * MiB + 20 * MiB + 40 * MiB + 2 * MiB + 20 * MiB  # while segment E exists


def block(address: int, size: int, state: str, frames: Optional[list] = None,
          requested: Optional[int] = None) -> Dict[str, Any]:
    b = {"address": address, "size": size, "requested_size": size if requested is None else requested,
         "state": state}
    if frames is not None:
        b["frames"] = frames
    return b


def segment(address: int, total: int, blocks: List[dict], kind: str = "large", stream: int = 0,
            device: int = 0) -> Dict[str, Any]:
    """A segment with the sizes the C++ snapshot derives from its blocks."""
    allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    requested = sum(b.get("requested_size", 0) for b in blocks if b["state"] != "inactive")
    return {"device": device, "address": address, "total_size": total, "allocated_size": allocated,
            "active_size": active, "requested_size": requested, "stream": stream,
            "segment_type": kind, "segment_pool_id": (0, 0), "is_expandable": False,
            "frames": blocks[0].get("frames", []), "blocks": blocks}


def entry(action: str, addr: int, size: int, frames: Optional[list], t: int, **extra: Any) -> Dict[str, Any]:
    e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": 1_000_000 + t}
    if frames is not None:
        e["frames"] = frames
    e.update(extra)
    return e


def make_snapshot() -> Dict[str, Any]:
    """Device 0: segments A-D live at the snapshot (D and its 1 KiB block from
    before the trace, E allocated and freed during it), blocks in every state;
    the trace peaks at PEAK_ALLOCATED after the 24 MiB temporary, then runs out
    of memory. Device 1: segments only, a block without frames."""
    segments = [
        segment(SEG_D, 2 * MiB, [block(SEG_D, 1024, "active_allocated", EARLY),
                                 block(SEG_D + 1024, 2 * MiB - 1024, "inactive", [])], kind="small"),
        segment(SEG_A, 20 * MiB, [block(SEG_A, 8 * MiB, "active_allocated", WEIGHTS),
                                  block(SEG_A + 8 * MiB, 4 * MiB, "active_pending_free", LOSS),
                                  block(SEG_A + 12 * MiB, 8 * MiB, "inactive", [])]),
        segment(SEG_B, 2 * MiB, [block(SEG_B, 512, "active_allocated", SMALL, requested=500),
                                 block(SEG_B + 512, 2 * MiB - 512, "inactive", [])], kind="small", stream=7),
        segment(SEG_C, 40 * MiB, [block(SEG_C, 16 * MiB, "active_allocated", ACT1),
                                  block(SEG_C + 16 * MiB, 24 * MiB, "inactive", [])]),
        segment(0x7E0000000000, 20 * MiB, [block(0x7E0000000000, 6 * MiB, "active_allocated"),
                                           block(0x7E0000000000 + 6 * MiB, 14 * MiB, "inactive")],
                device=1),
    ]
    trace = [
        entry("segment_alloc", SEG_A, 20 * MiB, WEIGHTS, 0),
        entry("alloc", SEG_A, 8 * MiB, WEIGHTS, 10),
        entry("segment_alloc", SEG_C, 40 * MiB, ACT1, 20),
        entry("alloc", SEG_C, 16 * MiB, ACT1, 30),
        entry("alloc", SEG_C + 16 * MiB, 24 * MiB, TMP, 40),  # the peak
        entry("oom", 0, 64 * MiB, OOM_STACK, 50, device_free=10 * MiB),
        entry("free_requested", SEG_C + 16 * MiB, 24 * MiB, TMP, 60),
        entry("free_completed", SEG_C + 16 * MiB, 24 * MiB, TMP, 70),
        entry("segment_alloc", SEG_B, 2 * MiB, SMALL, 80),
        entry("alloc", SEG_B, 500, SMALL, 90),
        entry("alloc", SEG_A + 8 * MiB, 4 * MiB, LOSS, 100),
        entry("free_requested", SEG_A + 8 * MiB, 4 * MiB, LOSS, 110),  # still pending at the snapshot
        entry("segment_alloc", SEG_E, 20 * MiB, EVAL, 120),
        entry("alloc", SEG_E, 10 * MiB, EVAL, 130),
        entry("free_requested", SEG_E, 10 * MiB, EVAL, 140),
        entry("free_completed", SEG_E, 10 * MiB, EVAL, 150),
        entry("segment_free", SEG_E, 20 * MiB, EVAL, 160),
        entry("snapshot", 0, 0, None, 170),
    ]
    return {"segments": segments, "device_traces": [trace, []]}


@pytest.fixture
def snapshot() -> Dict[str, Any]:
    return make_snapshot()


@pytest.fixture
def snapshot_file(tmp_path: Path, snapshot: Dict[str, Any]) -> Path:
    path = tmp_path / "snapshot.pickle"
    with open(path, "wb") as f:  # what torch.cuda.memory._dump_snapshot does
        pickle.dump(snapshot, f)
    return path


def png_size(data: bytes) -> tuple:
    """(width, height) from a PNG's IHDR chunk."""
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def check_png(path: Path) -> tuple:
    """The file is a PNG that matplotlib reads back at the size its header says."""
    import matplotlib.image

    data = path.read_bytes()
    width, height = png_size(data)
    assert width == int(mv.FIGURE_WIDTH * mv.DPI)
    image = matplotlib.image.imread(path)
    assert image.shape[:2] == (height, width)
    assert image.shape[2] in (3, 4)
    assert image.std() > 0  # something was drawn
    return width, height


# ---------------------------------------------------------------------------
# The fixture is in torch's format: torch's own tools read it
# ---------------------------------------------------------------------------


class TestTorchReadsTheFixture:
    def test_segments_and_memory_flamegraph_input(self, snapshot):
        from torch.cuda import _memory_viz as torch_viz

        for fn in (torch_viz.segments, torch_viz.memory):
            # format_flamegraph would download flamegraph.pl: take its input instead.
            lines = fn(snapshot, format_flamegraph=lambda text: text).splitlines()
            total = sum(int(line.rsplit(" ", 1)[1]) for line in lines)
            assert total == sum(s["total_size"] for s in snapshot["segments"])
            assert any("train.py:43:forward" not in line and "model.py:12:__init__" in line
                       for line in lines)
            assert any("active_pending_free" in line for line in lines)

    def test_trace_plot_and_text_tools(self, snapshot):
        from torch.cuda import _memory_viz as torch_viz

        page = torch_viz.trace_plot(copy.deepcopy(snapshot))
        assert "Active Memory Timeline" in page
        assert "Allocator State History" in torch_viz.segment_plot(copy.deepcopy(snapshot))
        text = torch_viz.trace(snapshot)
        assert "raise OutOfMemoryError" in text  # reads the oom entry's device_free
        assert "total_reserved" in torch_viz.segsum(snapshot)  # its accounting assertions hold


# ---------------------------------------------------------------------------
# The analysis behind the picture
# ---------------------------------------------------------------------------


class TestAnalysis:
    def test_peaks_and_reconstruction_before_the_trace(self, snapshot):
        (dev0, dev1) = mv.analyze_snapshot(snapshot, top=3)
        assert dev0.device == 0 and dev1.device == 1
        # segment D and its 1 KiB block predate the trace: found by walking it backwards
        assert dev0.allocated[0] == 1024 and dev0.reserved[0] == 2 * MiB
        assert dev0.peak_allocated == PEAK_ALLOCATED
        assert dev0.peak_index == 5  # after the fifth entry
        assert dev0.peak_reserved == PEAK_RESERVED
        # at the end: the requested sizes of the live and pending-free blocks
        assert dev0.allocated[-1] == 1024 + 8 * MiB + 4 * MiB + 500 + 16 * MiB
        assert dev0.reserved[-1] == dev0.reserved_now == 64 * MiB
        assert dev0.time_unit == "ms" and dev0.times[-1] == pytest.approx(0.17)

    def test_top_sites_and_other(self, snapshot):
        dev0 = mv.analyze_snapshot(snapshot, device=0, top=3)[0]
        assert [s.label for s in dev0.sites] == [
            "forward (user/train.py:43)", "forward (user/train.py:42)", "evaluate (user/train.py:70)"]
        assert [s.peak_bytes for s in dev0.sites] == [24 * MiB, 16 * MiB, 10 * MiB]
        assert dev0.other_sites == 4  # weights, loss, step, setup
        assert list(dev0.series) == [s.label for s in dev0.sites] + ["other"]
        # the layers add up to the allocated memory at every sample
        for i, total in enumerate(dev0.allocated):
            assert sum(layer[i] for layer in dev0.series.values()) == total
        assert dev0.series["other"][dev0.peak_index] == 1024 + 8 * MiB

    def test_live_at_peak_and_oom(self, snapshot):
        dev0 = mv.analyze_snapshot(snapshot, device=0)[0]
        assert [a.size for a in dev0.live_at_peak] == [24 * MiB, 16 * MiB, 8 * MiB, 1024]
        assert dev0.live_at_peak[0].address == SEG_C + 16 * MiB
        assert dev0.live_at_peak[0].frames == TMP
        assert dev0.live_at_peak[-1].site == "setup (user/setup_model.py:5)"
        (oom,) = dev0.ooms
        assert oom["size"] == 64 * MiB and oom["allocated"] == PEAK_ALLOCATED
        assert oom["reserved"] == 62 * MiB

    def test_segments_only_device_and_missing_frames(self, snapshot):
        dev1 = mv.analyze_snapshot(snapshot, device=1)[0]
        assert not dev1.has_trace
        assert dev1.peak_allocated == dev1.allocated_now == 6 * MiB
        assert [s.label for s in dev1.sites] == [mv.NO_STACK]

    def test_unknown_device(self, snapshot):
        with pytest.raises(mv.SnapshotError, match=r"device 3 .*\(devices with data: 0, 1\)"):
            mv.analyze_snapshot(snapshot, device=3)


# ---------------------------------------------------------------------------
# The picture and the page
# ---------------------------------------------------------------------------


class TestRender:
    def test_png_and_html(self, tmp_path, snapshot_file):
        report = mv.render_snapshot(snapshot_file, tmp_path / "out.html", tmp_path / "out.png", top=3)
        assert report.png_path == tmp_path / "out.png" and report.html_path == tmp_path / "out.html"
        check_png(report.png_path)
        page = report.html_path.read_text(encoding="utf-8")
        assert page == report.html
        # the PNG itself is inlined: the page needs nothing else
        assert f'src="data:image/png;base64,{base64.b64encode(report.png_path.read_bytes()).decode()}"' in page
        assert "http://" not in page and "https://" not in page and "<script" not in page
        assert f"{PEAK_ALLOCATED:,} B" in page  # peak allocated
        assert f"{PEAK_RESERVED:,} B" in page  # peak reserved
        for site in ("forward (user/train.py:43)", "forward (user/train.py:42)",
                     "evaluate (user/train.py:70)"):
            assert site in page
        assert "/home/user/model.py:12 in __init__" in page  # a stack of a live allocation at the peak
        assert f"{64 * MiB:,} B" in page and f"{10 * MiB:,} B" in page  # the OOM: requested, free
        assert "Device 0" in page and "Device 1" in page
        assert "no trace was recorded for this device" in page
        assert "&lt;no stack recorded&gt;" in page
        assert f"{SEG_C:#x}" in page  # the segment table

    def test_in_memory_snapshot_without_files(self, snapshot):
        report = mv.render_snapshot(snapshot, device=0)
        assert report.png_path is None and report.html_path is None
        assert report.png.startswith(PNG_MAGIC)
        assert [d.device for d in report.devices] == [0]
        assert "Device 1" not in report.html

    def test_more_devices_make_a_taller_picture(self, snapshot):
        one = png_size(mv.render_snapshot(snapshot, device=0).png)
        both = png_size(mv.render_snapshot(snapshot).png)
        assert one[0] == both[0] and both[1] > one[1]

    @pytest.mark.parametrize("empty", [{"segments": [], "device_traces": []},
                                       {"segments": [], "device_traces": [[], []]},
                                       {"segments": []},
                                       []])
    def test_empty_snapshot(self, tmp_path, empty):
        report = mv.render_snapshot(empty, tmp_path / "e.html", tmp_path / "e.png")
        assert report.devices == []
        check_png(tmp_path / "e.png")
        assert "The snapshot is empty" in report.html

    def test_segments_only_snapshot(self, tmp_path, snapshot):
        segments_only = {"segments": snapshot["segments"]}  # no device_traces at all
        report = mv.render_snapshot(segments_only, png_path=tmp_path / "s.png")
        check_png(tmp_path / "s.png")
        dev0 = report.devices[0]
        assert not dev0.has_trace
        assert dev0.peak_allocated == 1024 + 8 * MiB + 4 * MiB + 500 + 16 * MiB
        assert f"{dev0.peak_allocated:,} B" in report.html

    def test_trace_without_time_stamps_or_frames(self, snapshot):
        for e in snapshot["device_traces"][0]:
            e.pop("time_us")
            e.pop("frames", None)
        for seg in snapshot["segments"]:
            for b in seg["blocks"]:
                b.pop("frames", None)
        report = mv.render_snapshot(snapshot, device=0)
        dev0 = report.devices[0]
        assert dev0.time_unit == "trace entry"
        assert dev0.peak_allocated == PEAK_ALLOCATED
        assert [s.label for s in dev0.sites] == [mv.NO_STACK]
        assert "after trace entry 5" in report.html

    def test_top_zero_puts_everything_in_other(self, snapshot):
        dev0 = mv.render_snapshot(snapshot, device=0, top=0).devices[0]
        assert dev0.sites == [] and list(dev0.series) == ["other"]
        assert dev0.series["other"] == dev0.allocated

    def test_many_segments_are_capped_in_the_picture(self, snapshot):
        extra = [segment(0x7D0000000000 + i * 2 * MiB, 2 * MiB,
                         [block(0x7D0000000000 + i * 2 * MiB, 2 * MiB, "inactive")], kind="small")
                 for i in range(mv.MAX_SEGMENT_BARS + 10)]
        snapshot["segments"] += extra
        report = mv.render_snapshot(snapshot, device=0)
        assert report.png.startswith(PNG_MAGIC)
        assert report.html.count("<tr>") > mv.MAX_SEGMENT_BARS + 10  # the table lists all of them


# ---------------------------------------------------------------------------
# Bad input and a missing matplotlib
# ---------------------------------------------------------------------------


class _RunsCode:
    """Unpickling this would create a file: a snapshot must never run code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


class TestBadInput:
    @pytest.mark.parametrize("content, message", [
        (b"segments,blocks\n1,2\n", "not a readable pickle"),
        (b'{"segments": []}', "not a readable pickle"),
        (b"", "not a readable pickle"),
        (pickle.dumps(42), "holds a int"),
        (pickle.dumps({"traceEvents": []}), "no 'segments' .*'traceEvents'"),
        (pickle.dumps({"segments": [{"address": 1}]}), "segment 0 is not a segment"),
        (pickle.dumps({"segments": [], "device_traces": [[{"addr": 1}]]}), r"device_traces\[0\]\[0\]"),
        (pickle.dumps({"segments": [{"total_size": 2, "blocks": [{"size": 2}]}]}), "block 0 of segment 0"),
    ])
    def test_not_a_snapshot(self, tmp_path, content, message):
        path = tmp_path / "bad.pickle"
        path.write_bytes(content)
        with pytest.raises(mv.SnapshotError, match=message) as info:
            mv.render_snapshot(path)
        assert "torch.cuda.memory._dump_snapshot" in str(info.value)  # says how to make one

    def test_objects_are_refused_not_run(self, tmp_path):
        marker = tmp_path / "ran"
        path = tmp_path / "evil.pickle"
        path.write_bytes(pickle.dumps(_RunsCode(marker)))
        with pytest.raises(mv.SnapshotError, match="holds a Python object of class"):
            mv.load_snapshot(path)
        assert not marker.exists()

    def test_missing_file_and_directory(self, tmp_path):
        with pytest.raises(FileNotFoundError):
            mv.render_snapshot(tmp_path / "nope.pickle")
        with pytest.raises(mv.SnapshotError, match="is a directory"):
            mv.render_snapshot(tmp_path)

    def test_bad_dict(self):
        with pytest.raises(mv.SnapshotError, match="no 'segments'"):
            mv.render_snapshot({"device_traces": []})

    def test_missing_matplotlib_says_what_to_install(self, monkeypatch, snapshot):
        monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
        with pytest.raises(ImportError, match=r"pip install 'torch-npu-profiler\[viz\]'"):
            mv.render_snapshot(snapshot)
        # the analysis alone does not need it
        assert mv.analyze_snapshot(snapshot)[0].peak_allocated == PEAK_ALLOCATED


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------


def run_cli(*args: str, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torch_npu.profiler.memory_viz", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**os.environ, "MPLBACKEND": "agg"})


class TestCommandLine:
    def test_renders_html_and_png(self, tmp_path, snapshot_file):
        html, png = tmp_path / "report.html", tmp_path / "pic.png"
        result = run_cli(str(snapshot_file), "-o", str(html), "--png", str(png), "--top", "3")
        assert result.returncode == 0, result.stderr
        assert f"wrote {html} and {png}" in result.stdout
        assert "device 0: peak allocated 48.00 MiB" in result.stdout
        check_png(png)
        assert "forward (user/train.py:43)" in html.read_text(encoding="utf-8")

    def test_default_outputs_and_device(self, tmp_path, snapshot_file):
        work = tmp_path / "work"
        work.mkdir()
        result = run_cli(str(snapshot_file), "--device", "1", cwd=work)
        assert result.returncode == 0, result.stderr
        check_png(work / "snapshot.png")
        page = (work / "snapshot.html").read_text(encoding="utf-8")
        assert "Device 1" in page and "Device 0" not in page

    def test_help(self):
        result = run_cli("--help")
        assert result.returncode == 0
        text = " ".join(result.stdout.split())  # argparse wraps lines
        for option in ("SNAPSHOT", "--output", "--png", "--device", "--top", "torch-npu-profiler[viz]"):
            assert option in text

    def test_errors(self, tmp_path, snapshot_file):
        text = tmp_path / "notes.txt"
        text.write_text("not a snapshot\n")
        result = run_cli(str(text), "-o", str(tmp_path / "x.html"))
        assert result.returncode == 1
        assert "not a memory snapshot" in result.stderr and "_dump_snapshot" in result.stderr
        assert "Traceback" not in result.stderr
        assert not (tmp_path / "x.html").exists()

        result = run_cli(str(tmp_path / "missing.pickle"))
        assert result.returncode == 1 and "missing.pickle" in result.stderr

        result = run_cli(str(snapshot_file), "--device", "5", "-o", str(tmp_path / "y.html"))
        assert result.returncode == 1 and "device 5" in result.stderr

        result = run_cli(str(snapshot_file), "--top", "-1")
        assert result.returncode == 2 and "--top" in result.stderr
