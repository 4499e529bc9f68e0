"""Streams and events: asynchrony, ordering, timing, per-thread streams."""

from __future__ import annotations

import ctypes
import functools
import threading

import pytest
import torch

import torch_npu  # noqa: F401


def test_stream_basics():
    s = torch.npu.Stream()
    assert isinstance(s, torch.Stream)
    assert s.device == torch.device("npu:0")
    assert s != torch.npu.default_stream()
    assert s.npu_stream != 0
    assert s.priority == 0
    high = torch.npu.Stream(priority=-1)
    assert high.priority == -1
    assert torch.npu.Stream.priority_range() == (0, -1)
    assert "npu_stream" in repr(s)
    assert torch.npu.Stream(device=2).device_index == 2


def test_current_stream_is_per_thread_and_settable():
    s = torch.npu.Stream()
    default = torch.npu.default_stream()
    assert torch.npu.current_stream() == default
    with torch.npu.stream(s):
        assert torch.npu.current_stream() == s
        seen = []
        thread = threading.Thread(target=lambda: seen.append(torch.npu.current_stream()))
        thread.start()
        thread.join()
        assert seen == [default]
    assert torch.npu.current_stream() == default
    torch.npu.set_stream(s)
    try:
        assert torch.npu.current_stream() == s
        assert torch.accelerator.current_stream() == s
    finally:
        torch.npu.set_stream(default)


def test_stream_context_switches_device():
    s = torch.npu.Stream(device=3)
    with torch.npu.stream(s):
        assert torch.npu.current_device() == 3
        assert torch.npu.current_stream() == s
        assert torch.empty(1, device="npu").device.index == 3
    assert torch.npu.current_device() == 0
    assert torch.npu.current_stream(3) == torch.npu.default_stream(3)


def test_query_is_false_while_work_is_pending():
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        torch.npu._sleep(300 * torch.npu._cycles_per_ms())
    assert not s.query()
    event = s.record_event()
    assert not event.query()
    s.synchronize()
    assert s.query() and event.query()


@functools.cache
def _stream_made_elsewhere() -> int:
    """A stream another library made: aclrtCreateStream called through
    ctypes on the runtime this process uses (the simulator). Made once and
    kept: work of the tests may still name it in the caching allocator."""
    runtime = ctypes.CDLL(torch_npu._C._runtime_library())  # loaded already: dlopen returns it
    handle = ctypes.c_void_p()
    torch.npu.synchronize()  # this thread's device is set in the runtime
    assert runtime.aclrtCreateStream(ctypes.byref(handle)) == 0
    return handle.value


def test_external_streams_take_torchs_work():
    # torch.npu.ExternalStream, as torch.cuda.ExternalStream: work queued
    # under it goes to the wrapped stream, in that stream's order.
    handle = _stream_made_elsewhere()
    ext = torch.npu.ExternalStream(handle)
    assert isinstance(ext, torch.npu.Stream) and ext.npu_stream == handle
    assert ext.device == torch.device("npu", 0) and ext.priority == 0
    x = torch.arange(6.0, device="npu")
    with torch.npu.stream(ext):
        assert torch.npu.current_stream().npu_stream == handle
        torch.npu._sleep(300 * torch.npu._cycles_per_ms())
    assert not ext.query()  # the sleep went to the wrapped stream
    with torch.npu.stream(ext):
        y = x * 2
        y.record_stream(ext)
    ext.synchronize()
    assert ext.query() and y.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    # A pool stream's handle wrapped again is the same queue.
    s = torch.npu.Stream()
    same = torch.npu.ExternalStream(s.npu_stream)
    with torch.npu.stream(s):
        torch.npu._sleep(300 * torch.npu._cycles_per_ms())
    event = same.record_event()
    assert not event.query()
    event.synchronize()
    assert s.query()
    torch.npu.default_stream().wait_stream(ext)


def test_external_stream_errors_are_clear():
    with pytest.raises(ValueError, match="null; the default stream is torch.npu.default_stream"):
        torch.npu.ExternalStream(0)
    with pytest.raises(ValueError, match="not a stream handle"):
        torch.npu.ExternalStream(0x1001)
    with pytest.raises(TypeError, match="stream_ptr must be"):
        torch.npu.ExternalStream("0x1000")
    with pytest.raises(RuntimeError, match="priority"):
        torch.npu.ExternalStream(_stream_made_elsewhere(), priority=-1)


def test_host_returns_before_device_work_finishes():
    done = torch.npu.Event()
    torch.npu._sleep(200 * torch.npu._cycles_per_ms())
    done.record()
    assert not done.query()  # the call above returned with the work pending
    done.synchronize()
    assert done.query()


@pytest.mark.parametrize("iteration", range(12))
def test_event_orders_two_streams(iteration):
    producer = torch.npu.Stream()
    consumer = torch.npu.Stream()
    n = 1 << 16
    data = torch.zeros(n, device="npu")
    out = torch.empty(n, device="npu")
    torch.npu.synchronize()
    with torch.npu.stream(producer):
        torch.npu._sleep((5 + 7 * (iteration % 4)) * torch.npu._cycles_per_ms())
        data.fill_(float(iteration + 1))
        ready = producer.record_event()
    with torch.npu.stream(consumer):
        consumer.wait_event(ready)
        out.copy_(data)
    consumer.synchronize()
    assert out.cpu().eq(iteration + 1).all()


def test_wait_stream_orders_streams():
    a, b = torch.npu.Stream(), torch.npu.Stream()
    x = torch.zeros(1024, device="npu")
    y = torch.empty(1024, device="npu")
    torch.npu.synchronize()
    with torch.npu.stream(a):
        torch.npu._sleep(30 * torch.npu._cycles_per_ms())
        x.fill_(3)
    b.wait_stream(a)
    with torch.npu.stream(b):
        y.copy_(x)
    b.synchronize()
    assert y.cpu().eq(3).all()


def test_ping_pong_between_two_streams_keeps_their_order():
    # The pattern of back-to-back collectives: the communicator stream waits
    # for the compute stream, which only waited for the communicator
    # stream's earlier work, so the simulator may skip queueing that wait
    # (Note [Implied stream waits]); each step must still see the last.
    compute, comm = torch.npu.Stream(), torch.npu.Stream()
    x = torch.zeros(4096, device="npu")
    torch.npu.synchronize()
    for i in range(20):
        ready = compute.record_event()
        comm.wait_event(ready)
        with torch.npu.stream(comm):
            if i % 5 == 0:
                torch.npu._sleep(2 * torch.npu._cycles_per_ms())
            x.mul_(2).add_(1)  # order matters: not commutative
        done = comm.record_event()
        compute.wait_event(done)
    with torch.npu.stream(compute):
        y = x.clone()
    compute.synchronize()
    assert y.cpu().eq(2.0**20 - 1).all()


def test_an_implied_wait_completes_its_record_before_later_work():
    # The other stream's queue is [wait for comm's record, record e]: comm's
    # wait for e is implied by its own order (Note [Implied stream waits]),
    # yet e must be complete by the time anything comm queued after the wait
    # is, as on a device: once `after` is synchronized, e reports complete
    # and its elapsed time to `after` is not negative. Without the implied
    # wait completing e, the other stream's worker, still waking up from the
    # sleep, completed e later: 5 to 18 of the 50 steps failed here.
    comm, other = torch.npu.Stream(), torch.npu.Stream()
    x = torch.ones(4, device="npu")
    torch.npu.synchronize()
    incomplete, negative = 0, 0
    for _ in range(50):
        e = torch.npu.Event(enable_timing=True)
        after = torch.npu.Event(enable_timing=True)
        with torch.npu.stream(comm):
            torch.npu._sleep(torch.npu._cycles_per_ms())  # the other worker falls asleep
        other.wait_event(comm.record_event())
        e.record(other)
        comm.wait_event(e)
        with torch.npu.stream(comm):
            x.add_(1)
            after.record(comm)
        after.synchronize()
        if not e.query():
            incomplete += 1
        elif e.elapsed_time(after) < 0:
            negative += 1
    assert (incomplete, negative) == (0, 0)
    assert x.cpu().eq(51).all()


def test_wait_through_a_third_stream_is_kept():
    # The compute stream waits for the communicator stream and for a third
    # stream before its record: the communicator stream's wait for that
    # record is not implied by its own order and must hold it back.
    compute, comm, third = torch.npu.Stream(), torch.npu.Stream(), torch.npu.Stream()
    data = torch.zeros(1 << 16, device="npu")
    out = torch.empty(1 << 16, device="npu")
    torch.npu.synchronize()
    compute.wait_event(comm.record_event())
    with torch.npu.stream(third):
        torch.npu._sleep(30 * torch.npu._cycles_per_ms())
        data.fill_(7)
    compute.wait_event(third.record_event())
    comm.wait_event(compute.record_event())
    with torch.npu.stream(comm):
        out.copy_(data)
    comm.synchronize()
    assert out.cpu().eq(7).all()


def test_elapsed_time_grows_with_the_work():
    def timed(ms):
        start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
        start.record()
        torch.npu._sleep(ms * torch.npu._cycles_per_ms())
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    short, long = timed(5), timed(60)
    assert short >= 5 * 0.9
    assert long > short


def test_event_errors_are_clear():
    never = torch.npu.Event()
    with pytest.raises(RuntimeError, match="never recorded"):
        never.wait()
    with pytest.raises(RuntimeError, match="never recorded"):
        torch.npu.current_stream().wait_event(never)
    untimed = torch.npu.Event()
    untimed.record()
    other = torch.npu.Event()
    other.record()
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        untimed.elapsed_time(other)
    timed = torch.npu.Event(enable_timing=True)
    with pytest.raises(RuntimeError, match="recorded"):
        timed.elapsed_time(torch.npu.Event(enable_timing=True))
    assert never.query()  # a never-recorded event counts as complete, as on CUDA


def test_event_binds_to_its_first_device():
    event = torch.npu.Event()
    event.record(torch.npu.Stream(device=1))
    assert event.device == torch.device("npu:1")
    with pytest.raises(RuntimeError, match="does not match"):
        event.record(torch.npu.Stream(device=0))
    event.record(torch.npu.Stream(device=1))
    event.synchronize()


def test_generic_torch_stream_and_event_work_on_npu():
    s = torch.Stream(device="npu")
    e = torch.Event(device="npu", enable_timing=True)
    e.record(s)
    s.synchronize()
    assert e.query() and s.query()
    torch.accelerator.set_stream(s)
    try:
        assert torch.npu.current_stream() == s
    finally:
        torch.accelerator.set_stream(torch.npu.default_stream())


def test_launch_blocking(python_subprocess):
    code = """
        import torch, torch_npu
        torch.npu._sleep(100 * torch.npu._cycles_per_ms())
        print(torch.npu.current_stream().query())
    """
    result = python_subprocess(code, env={"ASCEND_LAUNCH_BLOCKING": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_torch_accelerator_api_on_npu():
    assert torch.accelerator.is_available()
    torch.accelerator.set_device_index(1)
    try:
        assert torch.accelerator.current_device_index() == 1
        assert torch.npu.current_device() == 1
    finally:
        torch.accelerator.set_device_index(0)
    t = torch.empty(1000, device="npu")
    del t
    assert torch.accelerator.memory_reserved(0) > 0
    torch.accelerator.empty_cache()
    torch.accelerator.synchronize(0)
    assert torch.npu.Stream().is_capturing() is False
