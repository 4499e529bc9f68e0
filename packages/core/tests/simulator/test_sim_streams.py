"""Streams, events, launched work and work errors."""

import ctypes
import random
import threading
import time
from ctypes import byref, c_float, c_int32

from _simlib import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_AICORE_EXCEPTION,
    ACL_ERROR_RT_EVENT_NOT_COMPLETE,
    ACL_EVENT_RECORDED_STATUS_COMPLETE,
    ACL_EVENT_RECORDED_STATUS_NOT_READY,
    ACL_EVENT_SYNC,
    ACL_STREAM_STATUS_COMPLETE,
    ACL_STREAM_STATUS_NOT_READY,
    D2H,
    NPU_SIM_WORK_AWAITED,
    NPU_SIM_WORK_UNTRACED,
    PARAM_ERRORS,
    MiB,
    flush_activity,
)


def sleeper(seconds):
    return lambda: time.sleep(seconds) or 0


def test_work_runs_in_stream_order(dev0):
    sim = dev0
    n = 4096
    p = sim.malloc(n)
    assert sim.lib.aclrtMemset(p, n, ord("A"), n) == 0
    s = sim.create_stream()
    sim.launch(sleeper(0.2), s)
    assert sim.lib.aclrtMemsetAsync(p, n, ord("B"), n, s) == 0
    out = sim.d2h(p, n, stream=s)
    assert sim.query(s) == ACL_STREAM_STATUS_NOT_READY
    assert out.raw == bytes(n)               # the copy has not run yet
    sim.sync(s)
    assert out.raw == b"B" * n
    assert sim.query(s) == ACL_STREAM_STATUS_COMPLETE
    sim.destroy_stream(s)
    sim.free(p)


def test_launched_work_ids_and_release(dev0):
    sim = dev0
    s = sim.create_stream()
    log = []
    ids = [sim.launch(lambda i=i: log.append(("run", i)) or 0, s,
                      release=lambda i=i: log.append(("release", i)))
           for i in range(5)]
    sim.sync(s)
    assert ids == sorted(ids) and len(set(ids)) == 5
    assert log == [(kind, i) for i in range(5) for kind in ("run", "release")]
    dev = c_int32(-1)
    assert sim.lib.npuSimStreamGetDevice(s, byref(dev)) == 0 and dev.value == 0
    sim.destroy_stream(s)


def test_stream_device_and_priority(sim):
    sim.set_device(2)
    s = sim.create_stream(priority=7)
    dev = c_int32(-1)
    assert sim.lib.npuSimStreamGetDevice(s, byref(dev)) == 0 and dev.value == 2
    assert sim.lib.npuSimStreamGetDevice(None, byref(dev)) == 0 and dev.value == 2
    seen = []
    sim.launch(lambda: seen.append(1) or 0, s)   # runs at a lower thread priority
    sim.sync(s)
    assert seen == [1]
    sim.destroy_stream(s)
    bad = ctypes.c_void_p()
    assert sim.lib.aclrtCreateStreamWithConfig(byref(bad), 8, 0) == ACL_ERROR_INVALID_PARAM
    assert "priority 8" in sim.err()
    assert sim.lib.aclrtDestroyStream(None) in PARAM_ERRORS
    sim.set_device(0)


def test_many_threads_enqueue_to_one_stream(dev0):
    sim = dev0
    s = sim.create_stream()
    order = {k: [] for k in range(4)}

    def producer(k):
        for i in range(300):
            sim.launch(lambda k=k, i=i: order[k].append(i) or 0, s)

    threads = [threading.Thread(target=producer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sim.sync(s)
    assert all(order[k] == list(range(300)) for k in order)
    sim.destroy_stream(s)


def test_a_deep_queue_runs_in_order_and_its_memory_is_reused(dev0):
    # The queue is a list of 256-item segments: a backlog of several
    # segments, drained, then a second one that reuses the first's.
    sim = dev0
    s = sim.create_stream()
    for backlog in (1000, 1300):
        gate = threading.Event()
        ran = []
        sim.launch(lambda: gate.wait(10) and 0, s)
        for i in range(backlog):
            sim.launch(lambda i=i: ran.append(i) or 0, s)
        assert ran == []  # all queued behind the gate
        gate.set()
        sim.sync(s)
        assert ran == list(range(backlog))
    sim.destroy_stream(s)


def test_destroy_stream_waits_for_its_work(dev0):
    sim = dev0
    s = sim.create_stream()
    done = []
    sim.launch(lambda: time.sleep(0.1) or done.append(1) or 0, s)
    sim.destroy_stream(s)
    assert done == [1]


def test_synchronizing_own_stream_from_work_is_an_error(dev0):
    sim = dev0
    s = sim.create_stream()
    rc = []
    sim.launch(lambda: rc.append(sim.lib.aclrtSynchronizeStream(s)) or 0, s)
    sim.sync(s)
    assert rc and rc[0] != 0
    sim.destroy_stream(s)


def test_event_orders_two_streams(dev0):
    """Ping-pong between two streams ordered only by events: the consumer
    must see each value the producer wrote, and the producer must not
    overwrite it before the consumer copied it."""
    sim = dev0
    lib = sim.lib
    rng = random.Random(1234)
    producer, consumer = sim.create_stream(), sim.create_stream()
    produced, consumed = sim.create_event(ACL_EVENT_SYNC), sim.create_event(ACL_EVENT_SYNC)
    n = 4 * MiB
    buf = sim.malloc(n)
    iterations = 150
    outs = [ctypes.create_string_buffer(32) for _ in range(iterations)]
    for i in range(iterations):
        value = i % 255 + 1
        sim.wait_event(producer, consumed)
        if rng.random() < 0.3:
            sim.launch(sleeper(rng.random() * 0.002), producer)
        size = n if rng.random() < 0.5 else n // 8
        assert lib.aclrtMemsetAsync(buf, n, value, size, producer) == 0
        sim.record(produced, producer)
        if rng.random() < 0.3:
            sim.launch(sleeper(rng.random() * 0.001), consumer)
        sim.wait_event(consumer, produced)
        assert lib.aclrtMemcpyAsync(outs[i], 16, buf, 16, D2H, consumer) == 0
        assert lib.aclrtMemcpyAsync(ctypes.addressof(outs[i]) + 16, 16, buf + size - 16, 16,
                                    D2H, consumer) == 0
        sim.record(consumed, consumer)
    sim.sync(consumer)
    for i, out in enumerate(outs):
        assert out.raw == bytes([i % 255 + 1]) * 32, i
    for e in (produced, consumed):
        lib.aclrtDestroyEvent(e)
    sim.destroy_stream(producer)
    sim.destroy_stream(consumer)
    sim.free(buf)


def test_event_orders_streams_of_different_devices(sim):
    lib = sim.lib
    sim.set_device(1)
    src_stream = sim.create_stream()
    src = sim.malloc(MiB)
    ev = sim.create_event(0)
    sim.set_device(0)
    dst_stream = sim.create_stream()
    dst = sim.malloc(MiB)
    for i in range(40):
        sim.launch(sleeper(0.001 * (i % 3)), src_stream)
        assert lib.aclrtMemsetAsync(src, MiB, i + 1, MiB, src_stream) == 0
        sim.record(ev, src_stream)
        sim.wait_event(dst_stream, ev)
        assert lib.aclrtMemcpyAsync(dst, MiB, src, MiB, 3, dst_stream) == 0
        out = sim.d2h(dst + MiB - 8, 8, stream=dst_stream)
        sim.sync(dst_stream)
        assert out.raw == bytes([i + 1]) * 8, i
    lib.aclrtDestroyEvent(ev)
    sim.destroy_stream(dst_stream)
    sim.destroy_stream(src_stream)
    sim.free(src)
    sim.free(dst)


def test_event_query_and_synchronize(dev0):
    sim = dev0
    s = sim.create_stream()
    ev = sim.create_event()
    assert sim.event_status(ev) == ACL_EVENT_RECORDED_STATUS_COMPLETE   # never recorded
    assert sim.lib.aclrtSynchronizeEvent(ev) == 0
    sim.launch(sleeper(0.2), s)
    sim.record(ev, s)
    assert sim.event_status(ev) == ACL_EVENT_RECORDED_STATUS_NOT_READY
    assert sim.lib.aclrtSynchronizeEvent(ev) == 0
    assert sim.event_status(ev) == ACL_EVENT_RECORDED_STATUS_COMPLETE
    # Re-recording: status follows the latest record.
    sim.launch(sleeper(0.1), s)
    sim.record(ev, s)
    assert sim.event_status(ev) == ACL_EVENT_RECORDED_STATUS_NOT_READY
    sim.sync(s)
    assert sim.event_status(ev) == ACL_EVENT_RECORDED_STATUS_COMPLETE
    sim.lib.aclrtDestroyEvent(ev)
    sim.destroy_stream(s)


def test_elapsed_time_follows_the_work(dev0):
    sim = dev0
    s = sim.create_stream()
    start, end = sim.create_event(), sim.create_event()
    timings = []
    for seconds in (0.05, 0.15):
        sim.record(start, s)
        sim.launch(sleeper(seconds), s)
        sim.record(end, s)
        assert sim.lib.aclrtSynchronizeEvent(end) == 0
        timings.append(sim.elapsed(start, end))
    assert timings[0] >= 45 and timings[1] >= 145
    assert timings[1] > timings[0]
    sim.lib.aclrtDestroyEvent(start)
    sim.lib.aclrtDestroyEvent(end)
    sim.destroy_stream(s)


def test_elapsed_time_errors(dev0):
    sim = dev0
    lib = sim.lib
    s = sim.create_stream()
    timed, timed2, untimed = sim.create_event(), sim.create_event(), sim.create_event(ACL_EVENT_SYNC)
    ms = c_float()
    assert lib.aclrtEventElapsedTime(byref(ms), timed, timed2) == ACL_ERROR_RT_EVENT_NOT_COMPLETE
    assert "never recorded" in sim.err()
    sim.record(timed, s)
    sim.record(untimed, s)
    sim.sync(s)
    assert lib.aclrtEventElapsedTime(byref(ms), timed, untimed) == ACL_ERROR_INVALID_PARAM
    assert "ACL_EVENT_TIME_LINE" in sim.err()
    sim.launch(sleeper(0.2), s)
    sim.record(timed2, s)
    assert lib.aclrtEventElapsedTime(byref(ms), timed, timed2) == ACL_ERROR_RT_EVENT_NOT_COMPLETE
    assert "not completed" in sim.err()
    sim.sync(s)
    assert lib.aclrtEventElapsedTime(byref(ms), timed, timed2) == 0 and ms.value >= 150
    assert lib.aclrtEventElapsedTime(None, timed, timed2) == ACL_ERROR_INVALID_PARAM
    for e in (timed, timed2, untimed):
        lib.aclrtDestroyEvent(e)
    sim.destroy_stream(s)


def test_destroying_an_event_with_a_pending_record_is_safe(dev0):
    sim = dev0
    s, other = sim.create_stream(), sim.create_stream()
    ev = sim.create_event()
    sim.launch(sleeper(0.1), s)
    sim.record(ev, s)
    sim.wait_event(other, ev)
    assert sim.lib.aclrtDestroyEvent(ev) == 0
    assert sim.lib.aclrtQueryEventStatus(ev, byref(ctypes.c_int())) in PARAM_ERRORS
    sim.sync(s)
    sim.sync(other)
    sim.destroy_stream(s)
    sim.destroy_stream(other)


def failing(sim, message=None, code=1):
    """Work that fails with `code`, setting `message` first if given."""
    def run():
        if message is not None:
            sim.lib.npuSimSetWorkError(message)
        return code
    return run


def test_work_errors_are_reported_once_by_the_next_sync(dev0):
    sim = dev0
    s = sim.create_stream()
    later = []
    sim.launch(failing(sim, b"boom"), s, name=b"failing_kernel")
    sim.launch(lambda: later.append(1) or 0, s)
    assert sim.lib.aclrtSynchronizeStream(s) == ACL_ERROR_RT_AICORE_EXCEPTION
    assert sim.err() == "device work 'failing_kernel' failed: boom"
    assert later == [1]                      # later work still ran
    assert sim.lib.aclrtSynchronizeStream(s) == 0
    assert sim.err() == ""
    # Without a message: the code; several failures: counted.
    sim.launch(failing(sim, code=7), s, name=b"k1")
    sim.launch(failing(sim, code=8), s, name=b"k2")
    assert sim.lib.aclrtSynchronizeStream(s) == ACL_ERROR_RT_AICORE_EXCEPTION
    msg = sim.err()
    assert msg.startswith("device work 'k1' failed: error code 7") and "1 later" in msg
    # A successful work's stray message does not leak into the next failure.
    sim.launch(lambda: sim.lib.npuSimSetWorkError(b"stale") or 0, s)
    sim.launch(failing(sim, code=3), s, name=b"k3")
    assert sim.lib.aclrtSynchronizeStream(s) == ACL_ERROR_RT_AICORE_EXCEPTION
    assert sim.err() == "device work 'k3' failed: error code 3"
    sim.destroy_stream(s)


def test_work_errors_via_device_and_event_sync(dev0):
    sim = dev0
    s = sim.create_stream()
    sim.launch(failing(sim, b"device level"), s, name=b"dev_kernel")
    assert sim.lib.aclrtSynchronizeDevice() == ACL_ERROR_RT_AICORE_EXCEPTION
    assert "device work 'dev_kernel' failed: device level" in sim.err()
    assert sim.lib.aclrtSynchronizeDevice() == 0
    assert sim.lib.aclrtSynchronizeStream(s) == 0        # reported once only
    ev = sim.create_event()
    sim.launch(failing(sim, b"event level"), s, name=b"ev_kernel")
    sim.record(ev, s)
    assert sim.lib.aclrtSynchronizeEvent(ev) == ACL_ERROR_RT_AICORE_EXCEPTION
    assert "ev_kernel" in sim.err()
    assert sim.lib.aclrtSynchronizeEvent(ev) == 0
    assert sim.lib.aclrtSynchronizeStream(s) == 0
    sim.lib.aclrtDestroyEvent(ev)
    sim.destroy_stream(s)


def test_work_errors_follow_event_waits_to_other_streams(dev0):
    # Note [Device-work errors follow the dependencies]: a stream that waits
    # for a record made after failed work inherits the failure, queued wait
    # or already-reached record alike, and it is reported once.
    sim = dev0
    producer, consumer, third = sim.create_stream(), sim.create_stream(), sim.create_stream()
    ev, ev2 = sim.create_event(), sim.create_event()
    # A queued wait: the record is still pending when the consumer waits.
    sim.launch(sleeper(0.1), producer)
    sim.launch(failing(sim, b"producer failed"), producer, name=b"producer_kernel")
    sim.record(ev, producer)
    assert sim.lib.aclrtStreamWaitEvent(consumer, ev) == 0
    ran = []
    sim.launch(lambda: ran.append(1) or 0, consumer)
    # ... and on through another event to a third stream.
    sim.record(ev2, consumer)
    assert sim.lib.aclrtStreamWaitEvent(third, ev2) == 0
    assert sim.lib.aclrtSynchronizeStream(third) == ACL_ERROR_RT_AICORE_EXCEPTION
    assert "device work 'producer_kernel' failed: producer failed" in sim.err()
    assert ran == [1]
    # Reported once: neither the consumer nor the producer raise it again.
    assert sim.lib.aclrtSynchronizeStream(consumer) == 0
    assert sim.lib.aclrtSynchronizeStream(producer) == 0
    # An already-reached record: the wait is not queued, the failure still
    # passes on.
    sim.launch(failing(sim, b"again"), producer, name=b"second_kernel")
    sim.record(ev, producer)
    assert sim.lib.aclrtSynchronizeEvent(ev) == ACL_ERROR_RT_AICORE_EXCEPTION
    assert sim.lib.aclrtSynchronizeStream(consumer) == 0  # the event sync reported it
    sim.launch(failing(sim, b"third"), producer, name=b"third_kernel")
    sim.record(ev, producer)
    time.sleep(0.05)  # the record is reached before the wait below
    assert sim.lib.aclrtStreamWaitEvent(consumer, ev) == 0
    assert sim.lib.aclrtSynchronizeStream(consumer) == ACL_ERROR_RT_AICORE_EXCEPTION
    assert "third_kernel" in sim.err()
    assert sim.lib.aclrtSynchronizeStream(producer) == 0
    # A wait on a clean record inherits nothing.
    sim.record(ev, producer)
    assert sim.lib.aclrtStreamWaitEvent(consumer, ev) == 0
    assert sim.lib.aclrtSynchronizeStream(consumer) == 0
    for e in (ev, ev2):
        sim.lib.aclrtDestroyEvent(e)
    for st in (producer, consumer, third):
        sim.destroy_stream(st)


def test_awaited_work_on_an_idle_stream_runs_on_the_synchronizing_thread(dev0):
    # Its launcher synchronizes next: handing it to a sleeping worker would
    # only add the worker's wake-up to the wait.
    sim = dev0
    s = sim.create_stream()
    sim.launch(lambda: 0, s)
    sim.sync(s)
    time.sleep(0.05)                         # the worker falls asleep
    ran_on = []
    sim.launch(lambda: ran_on.append(threading.get_ident()) or 0, s, flags=NPU_SIM_WORK_AWAITED)
    assert ran_on == []                      # launching does not run it
    sim.sync(s)
    assert ran_on == [threading.get_ident()]
    # Its errors are reported by that synchronization, as any work's.
    sim.launch(failing(sim, b"awaited"), s, name=b"awaited_kernel", flags=NPU_SIM_WORK_AWAITED)
    assert sim.lib.aclrtSynchronizeStream(s) == ACL_ERROR_RT_AICORE_EXCEPTION
    assert sim.err() == "device work 'awaited_kernel' failed: awaited"
    sim.destroy_stream(s)


def test_awaited_work_still_runs_after_the_work_before_it(dev0):
    sim = dev0
    s = sim.create_stream()
    order = []
    sim.launch(lambda: time.sleep(0.1) or order.append("earlier") or 0, s)
    sim.launch(lambda: order.append("awaited") or 0, s, flags=NPU_SIM_WORK_AWAITED)
    sim.launch(lambda: order.append("later") or 0, s)
    sim.sync(s)
    assert order == ["earlier", "awaited", "later"]
    sim.destroy_stream(s)


def test_synchronize_keeps_copies_behind_earlier_work(dev0):
    # A synchronizer may run queued copies itself while the worker is idle,
    # but never ahead of work queued before them, nor user work itself.
    sim = dev0
    n = 2 * MiB  # large enough to count as a bulk copy
    p = sim.malloc(n)
    delta = sim.delta()
    s = sim.create_stream()
    main = threading.get_native_id()
    ran_on = []

    def fill_a():
        time.sleep(0.05)
        ctypes.memset(p + delta, ord("A"), n)
        ran_on.append(threading.get_native_id())
        return 0

    for _ in range(3):
        sim.launch(fill_a, s)
        assert sim.lib.aclrtMemsetAsync(p + n // 2, n // 2, ord("B"), n // 2, s) == 0
        out = sim.d2h(p, n, stream=s)
        sim.sync(s)
        assert out.raw == b"A" * (n // 2) + b"B" * (n // 2)
    assert ran_on and main not in ran_on
    sim.destroy_stream(s)
    sim.free(p)


def test_copies_stay_ordered_while_threads_synchronize(dev0):
    sim = dev0
    n = 1 * MiB
    s = sim.create_stream()
    p = sim.malloc(n)
    outs = []
    stop = threading.Event()

    def synchronizer():
        while not stop.is_set():
            sim.sync(s)

    threads = [threading.Thread(target=synchronizer) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(60):
            assert sim.lib.aclrtMemsetAsync(p, n, i, n, s) == 0
            outs.append(sim.d2h(p, n, stream=s))
            if i % 7 == 0:
                time.sleep(0.001)  # let the worker fall asleep now and then
        sim.sync(s)
    finally:
        stop.set()
        for t in threads:
            t.join()
    for i, out in enumerate(outs):
        assert out.raw == bytes([i]) * n, i
    sim.destroy_stream(s)
    sim.free(p)


def test_untraced_work_runs_in_order_and_leaves_no_activity_record(dev0):
    sim = dev0
    s = sim.create_stream()
    order = []
    flush_activity(sim)
    assert sim.lib.npuSimActivityEnable(1) == 0
    try:
        traced = sim.launch(lambda: order.append("traced") or 0, s, name=b"kernel")
        sim.launch(lambda: order.append("untraced") or 0, s, name=b"marker", flags=NPU_SIM_WORK_UNTRACED)
        sim.sync(s)
    finally:
        assert sim.lib.npuSimActivityEnable(0) == 0
    assert order == ["traced", "untraced"]
    assert flush_activity(sim) == [(b"kernel", traced)]
