"""Note [Host op correlation ids] (csrc/npu/NPUHostOpActivity.h): while on,
each op gets a correlation id around its launches, so device work is
attributed to the innermost op that launched it; the ops are kept with their
thread and times; off, nothing is registered or recorded."""

from __future__ import annotations

import threading

import pytest
import torch

import torch_npu

C = torch_npu._C


@pytest.fixture
def recording():
    torch.npu.synchronize()
    C._activity_flush()
    C._activity_flush_host_ops()
    C._activity_enable(True)
    C._activity_record_host_ops(True)
    try:
        yield
    finally:
        torch.npu.synchronize()
        if C._activity_recording_host_ops():
            C._activity_record_host_ops(False)
        C._activity_enable(False)
        C._activity_flush()
        C._activity_flush_host_ops()


def test_kernels_carry_the_id_of_the_innermost_op_that_launched_them(recording):
    x = torch.ones(64, device="npu")  # aten::ones > aten::fill_ launches
    y = x.to(torch.float64)  # aten::to > aten::_to_copy > aten::copy_ ... launches
    torch.npu.synchronize()
    C._activity_record_host_ops(False)
    records = C._activity_flush()
    ops = {op["correlation_id"]: op for op in C._activity_flush_host_ops()}
    fill = next(r for r in records if r["name"] == "aten::fill_")
    assert ops[fill["correlation_id"]]["name"] == "aten::fill_"
    outer = [op for op in ops.values() if op["name"] == "aten::ones"]
    assert len(outer) == 1 and outer[0]["start_ns"] <= ops[fill["correlation_id"]]["start_ns"]
    copies = [r for r in records if r["name"] == "aten::copy_"]
    assert copies and all(ops[r["correlation_id"]]["name"] in ("aten::copy_", "aten::_copy_from") for r in copies)
    for record in records:
        op = ops[record["correlation_id"]]
        assert op["start_ns"] <= record["start_ns"]  # launched while the op ran, on the same clock
    assert y.dtype == torch.float64


def test_host_ops_record_their_thread_and_times(recording):
    with torch.autograd.profiler.record_function("my_region"):
        torch.ones(8, device="npu").add_(1)
    C._activity_record_host_ops(False)
    ops = C._activity_flush_host_ops()
    region = next(op for op in ops if op["name"] == "my_region")
    inner = [op for op in ops if op["name"] == "aten::add_"]
    assert inner and region["start_ns"] <= inner[0]["start_ns"] <= inner[0]["end_ns"] <= region["end_ns"]
    assert {op["os_thread_id"] for op in ops} == {threading.get_native_id()}
    assert len({op["correlation_id"] for op in ops}) == len(ops)


def test_the_callback_is_per_thread(recording):
    seen = []

    def other():
        torch.npu.set_device(0)
        seen.append(C._activity_recording_host_ops())
        torch.ones(8, device="npu").mul_(2)
        torch.npu.synchronize()

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen == [False]
    assert not any(op["name"] == "aten::mul_" for op in C._activity_flush_host_ops())
    muls = [r for r in C._activity_flush() if r["name"] == "aten::mul_"]
    assert muls and all(r["correlation_id"] == 0 for r in muls)


def test_off_registers_nothing_and_records_nothing():
    assert not C._activity_recording_host_ops()
    torch.ones(8, device="npu").add_(1)
    assert C._activity_flush_host_ops() == []
    with pytest.raises(RuntimeError, match="host-op recording is off in this thread"):
        C._activity_record_host_ops(False)
    C._activity_record_host_ops(True)
    try:
        with pytest.raises(RuntimeError, match="already on"):
            C._activity_record_host_ops(True)
    finally:
        C._activity_record_host_ops(False)
        C._activity_flush_host_ops()
