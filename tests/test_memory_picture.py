"""A memory snapshot of the npu allocator (core) drawn by the profiler's
memory_viz: the picture's numbers are the allocator's."""

from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401

pytest.importorskip("matplotlib", reason="memory_viz draws with matplotlib (torch-npu-profiler[viz])")
from torch_npu.profiler import memory_viz  # noqa: E402

MiB = 1 << 20


def test_an_npu_snapshot_renders_with_the_allocators_numbers(tmp_path):
    torch.npu.synchronize()
    torch.npu.empty_cache()
    torch.npu.reset_peak_memory_stats()
    torch.npu.memory._record_memory_history(stacks="python")
    try:
        keep = torch.empty(6 * MiB, dtype=torch.uint8, device="npu")
        temp = torch.empty(10 * MiB, dtype=torch.uint8, device="npu")
        del temp
        snapshot = torch.npu.memory._snapshot()
    finally:
        torch.npu.memory._record_memory_history(enabled=None)
    html, png = tmp_path / "memory.html", tmp_path / "memory.png"
    report = memory_viz.render_snapshot(snapshot, str(html), str(png), device=torch.npu.current_device())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = html.read_text()
    assert "data:image/png;base64," in page and "test_memory_picture.py" in page
    (memory,) = report.devices
    # The trace's peak is the allocator's: 6 + 10 MiB live at once (the
    # picture counts what was requested, the allocator whole blocks).
    assert 16 * MiB <= memory.peak_allocated <= torch.npu.max_memory_allocated()
    assert keep.numel() == 6 * MiB
