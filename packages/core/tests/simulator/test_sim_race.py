"""The stream race detector's happens-before rules (Note [Stream race detection]).

Work declares what it reads and writes; the detector orders accesses with
vector clocks (stream order, event record + stream wait, host
synchronisation) and fails the launch of an unordered conflicting access.
"""

import ctypes
import time
from ctypes import byref, c_int

import pytest
from _simlib import (
    ACL_EVENT_RECORDED_STATUS_COMPLETE,
    ACL_STREAM_STATUS_COMPLETE,
    ACL_SUCCESS,
    SITE_FN,
    AclError,
)

ACL_ERROR_RT_FAILURE = 500003
N = 4096


@pytest.fixture
def race(dev0):
    assert dev0.lib.npuSimRaceCheckEnable(1) == ACL_SUCCESS
    yield dev0
    dev0.sync_device()
    assert dev0.lib.npuSimRaceCheckEnable(0) == ACL_SUCCESS
    dev0.lib.npuSimRaceCheckSetSiteProvider(None)


def enabled(sim):
    on = c_int()
    assert sim.lib.npuSimRaceCheckEnabled(byref(on)) == ACL_SUCCESS
    return on.value


def test_switch(race):
    assert enabled(race) == 1
    race.lib.npuSimRaceCheckEnable(0)
    assert enabled(race) == 0
    race.lib.npuSimRaceCheckEnable(1)


def test_unordered_write_after_write_fails_the_launch(race):
    p = race.malloc(N)
    s1, s2 = race.create_stream(), race.create_stream()
    race.launch_accessing(s1, b"producer", writes=[(p, N)])
    with pytest.raises(AclError) as raised:
        race.launch_accessing(s2, b"consumer", writes=[(p + 100, 8)])
    assert raised.value.code == ACL_ERROR_RT_FAILURE
    message = raised.value.message
    assert "write-after-write" in message and "'consumer'" in message and "'producer'" in message
    assert f"[{p + 100:#x}, {p + 108:#x}) (8 bytes)" in message
    # Nothing was recorded for the refused launch: the same stream goes on.
    race.launch_accessing(s1, b"producer again", writes=[(p, N)])


def test_same_stream_and_disjoint_ranges_are_silent(race):
    p = race.malloc(2 * N)
    s1, s2 = race.create_stream(), race.create_stream()
    race.launch_accessing(s1, b"a", writes=[(p, N // 2)])
    race.launch_accessing(s1, b"b", reads=[(p, N)], writes=[(p, N)])
    race.launch_accessing(s2, b"c", reads=[(p + N, N)], writes=[(p + N, N)])
    race.launch_accessing(s2, b"empty", writes=[(p, 0)])
    with pytest.raises(AclError, match="'d'.*'b'"):
        race.launch_accessing(s2, b"d", reads=[(p + N - 1, 2)])


def test_event_record_and_wait_order_the_streams(race):
    p = race.malloc(N)
    s1, s2 = race.create_stream(), race.create_stream()
    early, late = race.create_event(), race.create_event()
    race.record(early, s1)
    race.launch_accessing(s1, b"write", writes=[(p, N)])
    race.wait_event(s2, early)  # recorded before the write: no order
    with pytest.raises(AclError, match="read-after-write"):
        race.launch_accessing(s2, b"read", reads=[(p, N)])
    race.record(late, s1)
    race.wait_event(s2, late)
    race.launch_accessing(s2, b"read", reads=[(p, N)])
    # The order is transitive: s3 waits for s2, which waited for s1.
    s3 = race.create_stream()
    after_read = race.create_event()
    race.record(after_read, s2)
    race.wait_event(s3, after_read)
    race.launch_accessing(s3, b"overwrite", writes=[(p, N)])


@pytest.mark.parametrize("how", ["stream", "device", "event", "query_stream", "query_event"])
def test_host_synchronisation_orders_later_launches(race, how):
    p = race.malloc(N)
    s1, s2 = race.create_stream(), race.create_stream()
    e = race.create_event()
    race.launch_accessing(s1, b"read", reads=[(p, N)])
    race.record(e, s1)
    if how == "stream":
        race.sync(s1)
    elif how == "device":
        race.sync_device()
    elif how == "event":
        race.check("aclrtSynchronizeEvent", race.lib.aclrtSynchronizeEvent(e))
    elif how == "query_stream":
        while race.query(s1) != ACL_STREAM_STATUS_COMPLETE:
            time.sleep(0.001)
    else:
        while race.event_status(e) != ACL_EVENT_RECORDED_STATUS_COMPLETE:
            time.sleep(0.001)
    race.launch_accessing(s2, b"write", writes=[(p, N)])


def test_reads_conflict_only_with_writes(race):
    p = race.malloc(N)
    s1, s2, s3 = race.create_stream(), race.create_stream(), race.create_stream()
    race.launch_accessing(s1, b"read 1", reads=[(p, N)])
    race.launch_accessing(s2, b"read 2", reads=[(p, N)])
    e = race.create_event()
    race.record(e, s1)
    race.wait_event(s3, e)
    # Ordered after the read on s1, not after the one on s2.
    with pytest.raises(AclError, match=r"write-after-read.*'read 2'"):
        race.launch_accessing(s3, b"write", writes=[(p, N)])


def test_copies_and_memsets_are_tracked_and_free_forgets(race):
    p, q = race.malloc(N), race.malloc(N)
    s1, s2 = race.create_stream(), race.create_stream()
    assert race.lib.aclrtMemsetAsync(p, N, 1, N, s1) == ACL_SUCCESS
    rc = race.lib.aclrtMemcpyAsync(q, N, p, N, 3, s2)  # ACL_MEMCPY_DEVICE_TO_DEVICE
    assert rc == ACL_ERROR_RT_FAILURE
    message = race.err()
    assert "read-after-write" in message and "'memcpy'" in message and "'memset'" in message
    race.sync(s1)
    race.free(p)  # the allocator's free: what the memory saw is forgotten
    p2 = race.malloc(N)
    race.launch_accessing(s2, b"new owner", writes=[(p2, N)])


def test_launch_sites_come_from_the_provider(race):
    texts = [ctypes.create_string_buffer(b"train.py:10"), ctypes.create_string_buffer(b"train.py:20")]
    sites = iter(texts)
    provider = SITE_FN(lambda: ctypes.addressof(next(sites)))
    race._keep.extend([provider, texts])
    race.lib.npuSimRaceCheckSetSiteProvider(ctypes.cast(provider, ctypes.c_void_p))
    p = race.malloc(N)
    s1, s2 = race.create_stream(), race.create_stream()
    race.launch_accessing(s1, b"first", writes=[(p, N)])
    with pytest.raises(AclError) as raised:
        race.launch_accessing(s2, b"second", writes=[(p, N)])
    message = raised.value.message
    assert "'second'" in message and "launched from train.py:20" in message
    assert "'first'" in message and "launched from train.py:10" in message


def test_off_tracks_nothing(dev0):
    p = dev0.malloc(N)
    s1, s2 = dev0.create_stream(), dev0.create_stream()
    dev0.launch_accessing(s1, b"write", writes=[(p, N)])
    dev0.launch_accessing(s2, b"write", writes=[(p, N)])
    dev0.sync_device()


def test_synchronous_memcpy_is_a_host_access(race):
    p = race.malloc(N)
    s1 = race.create_stream()
    race.launch_accessing(s1, b"producer", writes=[(p, N)])
    # The host reads memory s1 may still be writing: nothing waited for it.
    with pytest.raises(AclError) as raised:
        race.d2h(p, N, sync=True)
    message = raised.value.message
    assert "read-after-write" in message and "'aclrtMemcpy'" in message and "'producer'" in message
    assert "the host (synchronous call)" in message
    race.sync(s1)
    race.d2h(p, N, sync=True)
    # A host write is ordered before every later launch.
    race.h2d(p, b"x" * N, sync=True)
    s2 = race.create_stream()
    race.launch_accessing(s2, b"consumer", reads=[(p, N)])


def test_synchronous_memset_is_a_host_access(race):
    p = race.malloc(N)
    s1 = race.create_stream()
    race.launch_accessing(s1, b"reader", reads=[(p, N)])
    rc = race.lib.aclrtMemset(p, N, 0, N)
    assert rc == ACL_ERROR_RT_FAILURE
    message = race.err()
    assert "write-after-read" in message and "'aclrtMemset'" in message and "'reader'" in message
    e = race.create_event()
    race.record(e, s1)
    race.check("aclrtSynchronizeEvent", race.lib.aclrtSynchronizeEvent(e))
    race.check("aclrtMemset", race.lib.aclrtMemset(p, N, 0, N))


def _capture(race, stream, launch):
    model = ctypes.c_void_p()
    race.check("aclmdlRICaptureBegin", race.lib.aclmdlRICaptureBegin(stream, 2))  # RELAXED
    launch()
    race.check("aclmdlRICaptureEnd", race.lib.aclmdlRICaptureEnd(stream, byref(model)))
    return model.value


def test_model_replays_are_checked_as_launches(race):
    p, q = race.malloc(N), race.malloc(N)
    s1, s2 = race.create_stream(), race.create_stream()

    def work():
        race.launch_accessing(s1, b"captured write", reads=[(q, N)], writes=[(p, N)])
        assert race.lib.aclrtMemsetAsync(q, N, 0, N, s1) == ACL_SUCCESS

    model = _capture(race, s1, work)
    try:
        # Capturing ran nothing, so it raced with nothing.
        race.launch_accessing(s2, b"writer", writes=[(q, N)])
        # The replay's memset writes q, which s2 wrote unordered.
        rc = race.lib.aclmdlRIExecuteAsync(model, s1)
        assert rc == ACL_ERROR_RT_FAILURE
        message = race.err()
        assert "'captured write'" in message and "read-after-write" in message and "'writer'" in message
        race.sync_device()
        race.check("aclmdlRIExecuteAsync", race.lib.aclmdlRIExecuteAsync(model, s1))
        # A read of the replay's output on another stream needs an order.
        with pytest.raises(AclError, match=r"read-after-write.*'captured write'"):
            race.launch_accessing(s2, b"reader", reads=[(p, N)])
        done = race.create_event()
        race.record(done, s1)
        race.wait_event(s2, done)
        race.launch_accessing(s2, b"reader", reads=[(p, N)])
        race.sync_device()
    finally:
        race.check("aclmdlRIDestroy", race.lib.aclmdlRIDestroy(model))


def test_model_lanes_are_ordered_by_their_captured_events(race):
    p = race.malloc(N)
    s1, s2 = race.create_stream(), race.create_stream()
    fork, join = race.create_event(), race.create_event()

    def work():
        race.launch_accessing(s1, b"lane 0 write", writes=[(p, N)])
        race.record(fork, s1)
        race.wait_event(s2, fork)  # s2 joins the capture
        race.launch_accessing(s2, b"lane 1 read", reads=[(p, N)])
        race.record(join, s2)
        race.wait_event(s1, join)

    model = _capture(race, s1, work)
    try:
        for _ in range(2):  # the second replay is ordered after the first by the join
            race.check("aclmdlRIExecuteAsync", race.lib.aclmdlRIExecuteAsync(model, s1))
        race.sync(s1)
    finally:
        race.check("aclmdlRIDestroy", race.lib.aclmdlRIDestroy(model))


def test_an_unordered_synchronisation_orders_nothing(race):
    p = race.malloc(N)
    s1, s2 = race.create_stream(), race.create_stream()
    race.launch_accessing(s1, b"write", writes=[(p, N)])
    race.check("npuSimSynchronizeStreamUnordered", race.lib.npuSimSynchronizeStreamUnordered(s1))
    with pytest.raises(AclError, match=r"read-after-write.*'write'"):
        race.launch_accessing(s2, b"read", reads=[(p, N)])
    race.sync(s1)
    race.launch_accessing(s2, b"read", reads=[(p, N)])
