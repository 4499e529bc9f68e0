"""torch.npu.mstx (Note [mstx records], csrc/npu/NPUMstx.h): marks and ranges
become activity records of kind "mstx" while recording is on, with a
device-side record per stream range; nothing is recorded while off; misuse
is an error at the call."""

from __future__ import annotations

import threading

import pytest
import torch

import torch_npu

C = torch_npu._C
mstx = torch.npu.mstx


def flush_mstx():
    torch.npu.synchronize()
    return [r for r in C._activity_flush() if r["kind"] == "mstx"]


def test_the_documented_names_are_there():
    assert torch_npu.npu.mstx is torch.npu.mstx
    for name in ("mark", "range_start", "range_end", "range_push", "range_pop", "mstx_range", "annotate"):
        assert callable(getattr(mstx, name))


def test_a_mark_is_one_instant_on_the_host(activity_recording):
    mstx.mark("checkpoint", domain="train")
    (record,) = flush_mstx()
    assert record["name"] == "checkpoint" and record["domain"] == "train"
    assert record["start_ns"] == record["end_ns"] > 0
    assert record["stream"] == 0 and record["correlation_id"] == 0
    assert record["device"] == torch.npu.current_device()
    assert record["tid"] == threading.get_native_id()


def test_pushed_ranges_nest_per_domain(activity_recording):
    assert mstx.range_push("outer") == 0
    assert mstx.range_push("inner") == 1
    assert mstx.range_push("other domain", domain="data") == 0
    assert mstx.range_pop() == 1  # inner
    assert mstx.range_pop(domain="data") == 0
    assert mstx.range_pop() == 0  # outer
    records = {r["name"]: r for r in flush_mstx()}
    outer, inner = records["outer"], records["inner"]
    assert outer["start_ns"] <= inner["start_ns"] <= inner["end_ns"] <= outer["end_ns"]
    assert records["other domain"]["domain"] == "data" and outer["domain"] == "default"


def test_ranges_end_on_any_thread_and_stacks_are_per_thread(activity_recording):
    range_id = mstx.range_start("handed over")
    mstx.range_push("main thread's")
    errors = []

    def worker():
        mstx.range_end(range_id)  # ids cross threads
        try:
            mstx.range_pop()  # the main thread's push is not this thread's
        except ValueError as e:
            errors.append(str(e))
        mstx.range_push("worker's")
        mstx.range_pop()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert len(errors) == 1 and "no range pushed" in errors[0]
    assert mstx.range_pop() == 0
    records = {r["name"]: r for r in flush_mstx()}
    main_tid = threading.get_native_id()
    assert records["handed over"]["tid"] == main_tid  # the thread that started it
    assert records["main thread's"]["tid"] == main_tid
    assert records["worker's"]["tid"] == thread.native_id != main_tid


def test_a_stream_range_covers_the_device_work_between_its_calls(activity_recording):
    side = torch.npu.Stream()
    x = torch.randn(128, 128, device="npu")
    torch.npu.synchronize()
    with torch.npu.stream(side):
        before = x.mm(x)
        range_id = mstx.range_start("step", stream=side)
        inside = [x.mm(x), x.mm(x)]
        mstx.range_end(range_id)
        after = x.mm(x)
    mstx.mark("flag", stream=side)
    torch.npu.synchronize()
    records = C._activity_flush()
    kernels = [r for r in records if r["kind"] == "kernel" and r["stream"] == side.npu_stream]
    assert [k["name"] for k in kernels] == ["aten::mm"] * 4  # mstx's own items leave no kernel record
    device_range = next(r for r in records if r["name"] == "step" and r["stream"] != 0)
    host_range = next(r for r in records if r["name"] == "step" and r["stream"] == 0)
    assert device_range["stream"] == side.npu_stream and device_range["device"] == side.device.index
    assert device_range["tid"] == host_range["tid"] == threading.get_native_id()
    first, second, third, fourth = kernels
    assert first["end_ns"] <= device_range["start_ns"] <= second["start_ns"]
    assert third["end_ns"] <= device_range["end_ns"] <= fourth["start_ns"]
    device_mark = next(r for r in records if r["name"] == "flag" and r["stream"] != 0)
    assert device_mark["start_ns"] == device_mark["end_ns"] >= fourth["end_ns"]
    assert before.shape == after.shape == inside[0].shape


def test_decorator_and_context_manager(activity_recording):
    @mstx.mstx_range("decorated", domain="d")
    def step(a):
        return a + 1

    @mstx.annotate()
    def named_by_function():
        return 0

    assert step(1) == 2
    assert named_by_function() == 0
    with mstx.mstx_range("block"):
        pass
    records = {r["name"]: r for r in flush_mstx()}
    assert records["decorated"]["domain"] == "d"
    assert "named_by_function" in next(name for name in records if name.endswith("named_by_function"))
    assert records["block"]["start_ns"] <= records["block"]["end_ns"]


def test_nothing_is_recorded_or_enqueued_while_off():
    torch.npu.synchronize()
    C._activity_flush()
    assert not C._activity_is_enabled()
    stream = torch.npu.current_stream()
    mstx.mark("off", stream=stream)
    range_id = mstx.range_start("started while off", stream=stream)
    assert mstx.range_push("pushed while off") == 0
    C._activity_enable(True)
    try:
        mstx.range_end(range_id)  # still a valid id: no error, and no record
        assert mstx.range_pop() == 0
        assert flush_mstx() == []
    finally:
        C._activity_enable(False)
        C._activity_flush()


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: mstx.range_end(987654321), ValueError, "not the id of an open range"),
        (lambda: mstx.range_end(0), ValueError, "not a range id"),
        (lambda: mstx.range_end("1"), ValueError, "not a range id"),
        (lambda: mstx.range_pop(domain="never pushed"), ValueError, "no range pushed"),
        (lambda: mstx.mark(""), ValueError, "message is empty"),
        (lambda: mstx.range_start("x", domain=""), ValueError, "domain is empty"),
        (lambda: mstx.mark(42), TypeError, "message must be a str"),
        (lambda: mstx.range_push("x", stream="stream 0"), TypeError, "npu stream"),
        (lambda: mstx.mark("x", stream=torch.Stream(device="cpu")), TypeError, "npu stream"),
    ],
)
def test_bad_input_is_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_a_range_ends_once_and_in_its_own_domain():
    range_id = mstx.range_start("r", domain="a")
    with pytest.raises(ValueError, match="started in domain 'a', not 'default'"):
        mstx.range_end(range_id)
    mstx.range_end(range_id, domain="a")
    with pytest.raises(ValueError, match="not the id of an open range"):
        mstx.range_end(range_id, domain="a")


def test_pytorchs_profiler_stubs_annotate_through_mstx(activity_recording):
    C._privateuse1_stubs_range_push("stub range")
    C._privateuse1_stubs_mark("stub mark")
    C._privateuse1_stubs_range_pop()
    records = {r["name"]: r for r in flush_mstx()}
    assert records["stub mark"]["domain"] == records["stub range"]["domain"] == "default"
    assert records["stub range"]["start_ns"] <= records["stub mark"]["start_ns"] <= records["stub range"]["end_ns"]
