"""PyTorch's own profilers on npu (Note [NPU activity in torch.profiler],
csrc/npu/NPUKinetoProfiler.cpp): torch.profiler with
ProfilerActivity.PrivateUse1 shows the NPU's kernels with device times, linked
to the ops that launched them, and torch.autograd.profiler.profile(
use_device="npu") works. The checks PyTorch's profiler tests and OpenReg's
make of a PrivateUse1 device, run here for npu: event times are not negative,
no "used in profiler but not enabled" message, no internal assert."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
import torch.nn as nn
from torch.autograd import DeviceType
from torch.autograd.profiler import profile as autograd_profile
from torch.profiler import ProfilerActivity, profile, record_function

import torch_npu

NPU = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def device_events(prof):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


def assert_times_sane(events):
    for e in events:
        assert e.time_range.start >= 0, (e.name, e.time_range.start)
        assert e.time_range.end >= e.time_range.start, e.name
        assert e.device_time_total >= 0, e.name


def test_kernels_show_with_device_times_linked_to_their_ops():
    x = torch.randn(64, 64, device="npu")
    torch.npu.synchronize()
    with profile(activities=NPU) as prof:
        y = x + x
        y.mm(y)
    kernels = device_events(prof)
    assert sorted(k.name for k in kernels) == ["aten::add", "aten::mm"]
    assert all(k.device_index == 0 for k in kernels)
    assert all(k.time_range.end > k.time_range.start for k in kernels)
    window = max(e.time_range.end for e in prof.events())
    assert all(k.time_range.end <= window for k in kernels)
    ops = {e.name: e for e in prof.events() if e.device_type == DeviceType.CPU}
    for name in ("aten::add", "aten::mm"):
        assert [k.name for k in ops[name].kernels] == [name]
        assert ops[name].device_time_total > 0
    assert_times_sane(prof.events())
    averages = {(a.key, a.device_type): a for a in prof.key_averages()}
    assert averages[("aten::mm", DeviceType.CPU)].device_time_total > 0
    assert not torch_npu._C._activity_is_enabled()  # the session gave recording back


def test_copies_memsets_and_streams():
    side = torch.npu.Stream()
    host = torch.randn(1024)
    with profile(activities=NPU) as prof:
        x = host.npu()
        with torch.npu.stream(side):
            torch.zeros(1024, device="npu")
    kinds = {}
    for e in device_events(prof):
        kinds.setdefault(e.name, []).append(e)
    assert "memcpy" in kinds and "memset" in kinds
    assert {e.device_resource_id for e in kinds["memcpy"]} == {0}  # the default stream
    assert {e.device_resource_id for e in kinds["memset"]} == {1}  # the first other stream
    assert x.device.type == "npu"


@pytest.mark.filterwarnings("ignore:.*Profiler clears events at the end of each cycle")
def test_a_schedule_traces_only_its_active_steps_every_cycle():
    x = torch.randn(16, 16, device="npu")
    torch.npu.synchronize()
    traces = []
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)
    with profile(activities=NPU, schedule=schedule, on_trace_ready=lambda p: traces.append(device_events(p))) as prof:
        for step in range(8):
            with record_function(f"step{step}"):
                x.mm(x)
            torch.npu.synchronize()  # a step's kernel runs within its step
            prof.step()
    assert [len(kernels) for kernels in traces] == [2, 2]  # one mm per active step, per cycle
    assert not torch_npu._C._activity_is_enabled()


def test_memory_and_shapes_with_npu_activity():
    with profile(activities=NPU, profile_memory=True, record_shapes=True) as prof:
        x = torch.empty(1 << 16, device="npu")
        x.fill_(1)
        del x
    fill = next(e for e in prof.events() if e.name == "aten::fill_" and e.device_type == DeviceType.CPU)
    assert [k.name for k in fill.kernels] == ["aten::fill_"]
    empty = next(e for e in prof.events() if e.name == "aten::empty")
    assert empty.device_memory_usage == 4 << 16
    assert fill.input_shapes[0] == [1 << 16]


def test_cpu_only_traces_have_no_npu_events():
    x = torch.ones(16, device="npu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x + x
    assert device_events(prof) == []
    assert not torch_npu._C._activity_is_enabled()


def test_chrome_trace_has_kernels_and_streams_linked_to_ops(tmp_path):
    x = torch.randn(32, 32, device="npu")
    # randn's kernel may still be queued: run it before the trace, which
    # records all device work that runs while it is on, as CUPTI does.
    torch.npu.synchronize()
    with profile(activities=NPU) as prof:
        x.mm(x)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert [k["name"] for k in kernels] == ["aten::mm"]
    assert kernels[0]["dur"] > 0 and kernels[0]["args"]["stream"] == 0
    op = next(e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::mm")
    assert op["args"]["External id"] == kernels[0]["args"]["External id"]
    assert op["ts"] <= kernels[0]["ts"] + kernels[0]["dur"]
    assert any(e.get("ph") == "M" and e.get("args", {}).get("name") == "stream 0 (default)" for e in events)


def test_mstx_ranges_show_on_the_host_and_on_the_stream():
    stream = torch.npu.current_stream()
    x = torch.randn(32, 32, device="npu")
    with profile(activities=NPU) as prof:
        range_id = torch.npu.mstx.range_start("forward", stream=stream)
        x.mm(x)
        torch.npu.mstx.range_end(range_id)
    named = [e for e in prof.events() if e.name == "forward"]
    assert sorted(int(e.device_type) for e in named) == sorted([int(DeviceType.CPU), int(DeviceType.PrivateUse1)])
    device_range = next(e for e in named if e.device_type == DeviceType.PrivateUse1)
    kernel = next(e for e in device_events(prof) if e.name == "aten::mm")
    assert device_range.time_range.start <= kernel.time_range.start
    assert kernel.time_range.end <= device_range.time_range.end


def test_training_step_backward_and_record_function():
    model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 10)).to("npu")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, target = torch.randn(8, 10, device="npu"), torch.randn(8, 10, device="npu")
    torch.npu.synchronize()  # work launched before the trace is not the trace's
    with profile(activities=NPU, record_shapes=True) as prof:
        with record_function("forward"):
            loss = nn.functional.mse_loss(model(x), target)
        loss.backward()
        optimizer.step()
    names = {e.name for e in prof.events()}
    assert "forward" in names and any("Backward" in n for n in names)
    kernels = device_events(prof)
    assert len(kernels) > 5
    # Every kernel is attributed to a host op, backward ones included.
    linked = {k.name for e in prof.events() if e.device_type == DeviceType.CPU for k in e.kernels}
    assert {k.name for k in kernels} <= linked
    assert_times_sane(prof.events())
    assert "aten::addmm" in prof.key_averages().table(sort_by="device_time_total", row_limit=20)


def test_kernels_launched_by_a_thread_the_profiler_does_not_trace_still_show():
    x = torch.randn(16, 16, device="npu")
    torch.npu.synchronize()

    def worker():
        torch.npu.set_device(0)
        x.mm(x)

    with profile(activities=NPU) as prof:
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    # torch.profiler traces the host ops of the thread that started it only
    # (as for CUDA); the device still ran the worker's kernel.
    assert not any(e.name == "aten::mm" and e.device_type == DeviceType.CPU for e in prof.events())
    assert [k.name for k in device_events(prof)] == ["aten::mm"]


def failing_index_select():
    # As ops' test_device_work_errors.py: the first call of a signature waits
    # for its kernel (and so do its consumers'); a later one fails in device
    # work, reported at a synchronisation.
    torch.zeros(10, device="npu").index_select(0, torch.tensor([1], device="npu")).mul(2).add(1)
    return torch.zeros(10, device="npu").index_select(0, torch.tensor([100], device="npu"))


def test_a_device_work_error_reaches_the_program_once():
    with pytest.raises(RuntimeError, match="device work 'aten::index_select' failed"):
        with profile(activities=NPU):
            failing_index_select()
    torch.npu.synchronize()  # reported once, by the profiler's synchronisation
    # torch's profiler raised from its exit before stopping Kineto; the next
    # trace still gets the device's work.
    with profile(activities=NPU) as again:
        torch.ones(3, device="npu") + 1
    assert [e.name for e in device_events(again)] == ["aten::fill_", "aten::add"]


def test_an_exception_inside_the_profiled_block():
    with pytest.raises(RuntimeError, match="inside"):
        with profile(activities=NPU) as prof:
            torch.ones(4, device="npu") * 2
            raise RuntimeError("inside")
    assert [e.name for e in device_events(prof)] == ["aten::fill_", "aten::mul"]
    assert not torch_npu._C._activity_is_enabled()


def test_a_collector_already_recording_keeps_the_records(capfd):
    torch_npu._C._activity_flush()
    torch_npu._C._activity_enable(True)
    try:
        with profile(activities=NPU) as prof:
            torch.ones(4, device="npu") * 3
        torch.npu.synchronize()
        assert "device activity is already being collected" in capfd.readouterr().err
        assert device_events(prof) == []
        assert torch_npu._C._activity_is_enabled()
        assert any(r["name"] == "aten::mul" for r in torch_npu._C._activity_flush())
    finally:
        torch_npu._C._activity_enable(False)
        torch_npu._C._activity_flush()


def test_a_collector_asking_for_kinetos_ids_gets_them(tmp_path, capfd):
    # Note [Kineto correlation for torch_npu.profiler]: the collector owns
    # the records; the plugin only pushes Kineto's ids, which are the ops'
    # "External id" in torch's trace.
    C = torch_npu._C
    assert C._activity_kineto_plugin_registered()
    x = torch.ones(4, device="npu")
    torch.npu.synchronize()
    C._activity_flush()
    C._activity_enable(True)
    C._activity_forward_kineto_correlation(True)
    try:
        with profile(activities=NPU) as prof:
            x * 3
            torch.npu.synchronize()
        records = [r for r in C._activity_flush() if r["name"] == "aten::mul"]
    finally:
        C._activity_forward_kineto_correlation(False)
        C._activity_enable(False)
        C._activity_flush()
    assert "already being collected" not in capfd.readouterr().err
    assert device_events(prof) == []  # the collector's, not the trace's
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    (op,) = [e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::mul"]
    (record,) = records
    assert record["correlation_id"] == op["args"]["External id"] != 0
    # Without forwarding asked for, the ops push nothing any more.
    C._activity_enable(True)
    try:
        x * 4
        torch.npu.synchronize()
        assert [r["correlation_id"] for r in C._activity_flush() if r["name"] == "aten::mul"] == [0]
    finally:
        C._activity_enable(False)


@pytest.mark.parametrize("use_kineto", [False, True])
def test_autograd_profiler_with_use_device_npu(use_kineto):
    x = torch.randn(64, 64, device="npu")
    torch.npu.synchronize()
    with autograd_profile(use_device="npu", use_kineto=use_kineto, record_shapes=True) as prof:
        with record_function("outer"):
            y = x.mm(x)
            y + 1
    events = prof.function_events
    assert {"outer", "aten::mm", "aten::add"} <= {e.name for e in events}
    assert_times_sane(events)
    mm = next(e for e in events if e.name == "aten::mm" and e.device_type == DeviceType.CPU)
    outer = next(e for e in events if e.name == "outer")
    assert 0 < mm.device_time_total <= outer.device_time_total
    if use_kineto:
        assert [k.name for k in mm.kernels] == ["aten::mm"]
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    assert "aten::mm" in table


def test_no_error_messages_or_internal_asserts():
    script = textwrap.dedent(
        """
        import torch, torch_npu
        from torch.autograd.profiler import profile as autograd_profile
        from torch.profiler import ProfilerActivity, profile, record_function
        x = torch.randn(16, 16, device="npu", requires_grad=True)
        with autograd_profile(use_device="npu") as p1:
            (x @ x).sum().backward()
        with autograd_profile(use_device="npu", use_kineto=True) as p2:
            x @ x
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p3:
            with record_function("block"):
                (x * 2).sum().backward()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p4:
            pass
        for p in (p1, p2):
            assert p.function_events, "no events"
            assert min(e.time_range.start for e in p.function_events) >= 0
        assert min(e.time_range.start for e in p3.events()) >= 0
        print("done")
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "done" in run.stdout
    for bad in ("used in profiler but not enabled", "kineto_ctx_ptr", "INTERNAL ASSERT", "Traceback"):
        assert bad not in output, output
