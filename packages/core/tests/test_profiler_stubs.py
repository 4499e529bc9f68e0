"""PyTorch's profilers on npu through core's PrivateUse1 profiler stubs
(csrc/npu/NPUProfilerStubs.cpp): ranges with real times, npu time measured
by timing events on the op's stream, no "not enabled" complaints."""

from __future__ import annotations

import logging

import torch
from torch.profiler import ProfilerActivity, profile

import torch_npu  # noqa: F401


def work(x: torch.Tensor) -> torch.Tensor:
    return (x @ x).relu().sum()


def test_autograd_profiler_with_use_device_npu_gives_real_times():
    x = torch.randn(128, 128).npu()
    work(x)
    torch.npu.synchronize()
    with torch.autograd.profiler.profile(use_device="npu") as prof:
        work(x)
        torch.npu.synchronize()
    events = prof.function_events
    assert events
    for e in events:
        assert 0 <= e.time_range.start <= e.time_range.end, (e.name, e.time_range)
        assert e.time_range.end - e.time_range.start < 60e6  # microseconds: under a minute
        assert e.device_time_total >= 0
    mm = [e for e in events if e.name == "aten::mm"]
    assert mm and mm[0].device_time_total > 0  # the matmul's device work took time on npu
    table = prof.key_averages().table()
    assert "Self NPU" in table and "-" not in table.split("Self CPU time total:")[1].split("\n")[0]


def test_torch_profiler_with_the_privateuse1_activity(caplog):
    x = torch.randn(64, 64).npu()
    work(x)
    torch.npu.synchronize()
    with caplog.at_level(logging.WARNING):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            work(x)
            torch.npu.synchronize()
    assert "not enabled" not in caplog.text
    # Host ops only: the npu kernels (rows of device type npu) carry the
    # names of the ops that launched them.
    averages = {e.key: e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CPU}
    assert "aten::mm" in averages
    assert all(e.cpu_time_total >= 0 for e in averages.values())
    assert averages["aten::mm"].cpu_time_total > 0
