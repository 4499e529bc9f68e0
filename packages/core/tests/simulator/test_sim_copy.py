"""aclrtMemcpy[Async] and aclrtMemset[Async]."""

import ctypes
import os

from _simlib import (
    ACL_ERROR_INVALID_PARAM,
    D2D,
    D2H,
    DEFAULT,
    H2D,
    H2H,
    MiB,
)


def test_sync_round_trips(dev0):
    sim = dev0
    data = os.urandom(MiB + 123)
    a = sim.malloc(len(data))
    b = sim.malloc(len(data))
    sim.h2d(a, data, sync=True)
    assert sim.lib.aclrtMemcpy(b, len(data), a, len(data), D2D) == 0
    assert sim.d2h(b, len(data), sync=True).raw == data
    sim.free(a)
    sim.free(b)


def test_async_round_trips_on_streams(dev0):
    sim = dev0
    s = sim.create_stream()
    for stream in (None, s):
        data = os.urandom(3 * MiB)
        a = sim.malloc(len(data))
        b = sim.malloc(len(data))
        sim.h2d(a, data, stream=stream)
        assert sim.lib.aclrtMemcpyAsync(b, len(data), a, len(data), D2D, stream) == 0
        out = sim.d2h(b, len(data), stream=stream)
        sim.sync(stream)
        assert out.raw == data
        sim.free(a)
        sim.free(b)
    sim.destroy_stream(s)


def test_default_kind_is_inferred(dev0):
    sim = dev0
    lib = sim.lib
    d = sim.malloc(64)
    e = sim.malloc(64)
    src = ctypes.create_string_buffer(b"inferred-kind!", 14)
    dst = ctypes.create_string_buffer(14)
    assert lib.aclrtMemcpy(d, 64, src, 14, DEFAULT) == 0          # H2D
    assert lib.aclrtMemcpy(e, 64, d, 14, DEFAULT) == 0            # D2D
    assert lib.aclrtMemcpy(dst, 14, e, 14, DEFAULT) == 0          # D2H
    assert dst.raw == b"inferred-kind!"
    other = ctypes.create_string_buffer(14)
    assert lib.aclrtMemcpy(other, 14, dst, 14, H2H) == 0
    assert other.raw == dst.raw


def test_copy_between_devices(sim):
    sim.set_device(1)
    on1 = sim.malloc(MiB)
    sim.set_device(0)
    on0 = sim.malloc(MiB)
    data = os.urandom(MiB)
    sim.h2d(on0, data)
    assert sim.lib.aclrtMemcpyAsync(on1, MiB, on0, MiB, D2D, None) == 0
    sim.sync()
    sim.set_device(1)
    assert sim.d2h(on1, MiB, sync=True).raw == data
    sim.set_device(0)
    sim.free(on0)
    sim.free(on1)


def test_memset(dev0):
    sim = dev0
    p = sim.malloc(10000)
    assert sim.lib.aclrtMemset(p, 10000, 0x1AB, 10000) == 0       # value is a byte
    assert sim.d2h(p, 10000, sync=True).raw == b"\xab" * 10000
    assert sim.lib.aclrtMemsetAsync(p + 100, 9900, 7, 50, None) == 0
    out = sim.d2h(p, 200)
    sim.sync()
    assert out.raw == b"\xab" * 100 + b"\x07" * 50 + b"\xab" * 50
    sim.free(p)


def test_large_copy(dev0):
    sim = dev0
    n = 64 * MiB
    data = os.urandom(n)
    p = sim.malloc(n)
    sim.h2d(p, data)
    out = sim.d2h(p, n)
    sim.sync()
    assert out.raw == data
    sim.free(p)


def test_bad_arguments_are_errors_not_crashes(dev0):
    sim = dev0
    lib = sim.lib
    p = sim.malloc(4096)
    host = ctypes.create_string_buffer(8192)

    def rejected(rc, *words):
        msg = sim.err()
        assert rc == ACL_ERROR_INVALID_PARAM, (rc, msg)
        for w in words:
            assert w in msg, (w, msg)

    rejected(lib.aclrtMemcpy(p, 16, host, 32, H2D), "exceeds destMax")
    rejected(lib.aclrtMemcpy(p, 8192, host, 8192, H2D), "runs past the end")
    rejected(lib.aclrtMemcpy(host, 64, p, 64, H2D), "kind ACL_MEMCPY_HOST_TO_DEVICE")
    rejected(lib.aclrtMemcpy(p, 64, host, 64, D2H), "ACL_MEMCPY_DEVICE_TO_HOST")
    rejected(lib.aclrtMemcpy(p, 64, host, 64, D2D), "not device memory")
    rejected(lib.aclrtMemcpy(host, 64, host, 64, 99), "unknown copy kind")
    rejected(lib.aclrtMemcpy(None, 64, host, 64, H2D), "dst is null")
    rejected(lib.aclrtMemcpyAsync(p + 8192, 64, host, 64, H2D, None), "not inside a live allocation")
    rejected(lib.aclrtMemset(p, 8192, 0, 8192), "runs past the end")
    rejected(lib.aclrtMemset(p, 16, 0, 32), "exceeds maxCount")
    sim.free(p)
    rejected(lib.aclrtMemcpy(host, 64, p, 64, D2H), "not inside a live allocation")
    rejected(lib.aclrtMemsetAsync(p, 64, 0, 64, None), "not inside a live allocation")
    not_a_stream = ctypes.create_string_buffer(64)
    assert lib.aclrtMemcpyAsync(host, 64, host, 64, H2H, not_a_stream) != 0
    assert "not a live stream" in sim.err()
    assert lib.aclrtMemcpy(host, 0, host, 0, H2D) == 0   # nothing to copy is fine
    sim.sync()
