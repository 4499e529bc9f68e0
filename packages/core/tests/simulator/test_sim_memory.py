"""Device and host memory: allocation, accounting, RSS, pointer attributes."""

import ctypes
import threading
from ctypes import byref, c_void_p

import pytest

from _simlib import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_ERROR_RT_MEMORY_ALLOCATION,
    ACL_MEM_LOCATION_TYPE_DEVICE,
    ACL_MEM_LOCATION_TYPE_HOST,
    ACL_MEM_LOCATION_TYPE_UNREGISTERED,
    PARAM_ERRORS,
    PtrAttributes,
    GiB,
    MiB,
)


def test_malloc_free_and_mem_info_accounting(dev0):
    sim = dev0
    free0, total = sim.mem_info()
    assert total == 16 * GiB
    a = sim.malloc(1000)                 # rounded to one page
    assert sim.mem_info()[0] == free0 - 4096
    b = sim.malloc(3 * MiB + 1)          # rounded to whole pages
    assert sim.mem_info()[0] == free0 - 4096 - (3 * MiB + 4096)
    assert a % 4096 == 0 and b % 4096 == 0 and a != b
    sim.free(a)
    sim.free(b)
    assert sim.mem_info() == (free0, total)


def test_memory_is_per_device(sim):
    sim.set_device(1)
    free1 = sim.mem_info()[0]
    p = sim.malloc(64 * MiB)
    assert sim.attrs(p) == (ACL_MEM_LOCATION_TYPE_DEVICE, 1)
    assert sim.mem_info()[0] == free1 - 64 * MiB
    sim.set_device(0)
    free0 = sim.mem_info()[0]
    sim.free(p)                          # freeing works from any current device
    assert sim.mem_info()[0] == free0
    sim.set_device(1)
    assert sim.mem_info()[0] == free1


def test_out_of_memory_reports_and_recovers(dev0):
    sim = dev0
    p = ctypes.c_void_p()
    assert sim.lib.aclrtMalloc(byref(p), 17 * GiB, 0) == ACL_ERROR_RT_MEMORY_ALLOCATION
    msg = sim.err()
    assert "aclrtMalloc: out of memory on device 0: tried to allocate 17.00 GiB, capacity 16.00 GiB" in msg
    big = sim.malloc(10 * GiB)
    assert sim.lib.aclrtMalloc(byref(p), 7 * GiB, 0) == ACL_ERROR_RT_MEMORY_ALLOCATION
    msg = sim.err()
    assert "tried to allocate 7.00 GiB" in msg and "10.00 GiB in use" in msg
    small = sim.malloc(1 * MiB)          # the next allocation that fits works
    sim.free(big)
    again = sim.malloc(7 * GiB)
    sim.free(again)
    sim.free(small)


def test_fragmentation_is_explained(runner):
    runner.ok(f"""
        sim.set_device(0)
        blocks = [sim.malloc(16 * MiB) for _ in range(4)]
        sim.free(blocks[0]); sim.free(blocks[2])
        p = ctypes.c_void_p()
        assert lib.aclrtMalloc(ctypes.byref(p), 32 * MiB, 0) == {ACL_ERROR_RT_MEMORY_ALLOCATION}
        msg = sim.err()
        assert "largest free block 16.00 MiB" in msg and "fragmented" in msg, msg
        sim.free(blocks[1])               # coalesces with both neighbours
        q = sim.malloc(48 * MiB)
        assert q == blocks[0]
    """, NPU_SIM_DEVICE_MEMORY="64MiB", NPU_SIM_DEVICE_COUNT=1)


def test_untouched_memory_costs_nothing_and_freed_memory_is_returned(runner):
    runner.ok("""
        def rss():
            for line in open("/proc/self/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        sim.set_device(0)
        base = rss()
        big = sim.malloc(8 * GiB)
        assert rss() - base < 32 * MiB, rss() - base
        touched = 256 * MiB
        assert lib.aclrtMemset(big + GiB, touched, 0x5A, touched) == 0
        grown = rss()
        assert grown - base > 200 * MiB, grown - base
        sim.free(big)
        assert rss() - base < 32 * MiB, rss() - base
        # The pages really went back: a new allocation reads zeros.
        again = sim.malloc(8 * GiB)
        assert sim.d2h(again + GiB, 64, sync=True).raw == bytes(64)
    """)


def test_pointer_attributes(sim):
    sim.set_device(0)
    d = sim.malloc(5000)
    assert sim.attrs(d) == (ACL_MEM_LOCATION_TYPE_DEVICE, 0)
    assert sim.attrs(d + 4999) == (ACL_MEM_LOCATION_TYPE_DEVICE, 0)
    assert sim.attrs(d + 5000)[0] == ACL_MEM_LOCATION_TYPE_UNREGISTERED
    sim.set_device(3)
    d3 = sim.malloc(4096)
    assert sim.attrs(d3 + 17) == (ACL_MEM_LOCATION_TYPE_DEVICE, 3)
    h = sim.malloc_host(3 * MiB)
    assert sim.attrs(h) == (ACL_MEM_LOCATION_TYPE_HOST, 0)
    assert sim.attrs(h + 3 * MiB - 1)[0] == ACL_MEM_LOCATION_TYPE_HOST
    plain = ctypes.create_string_buffer(64)
    assert sim.attrs(ctypes.addressof(plain))[0] == ACL_MEM_LOCATION_TYPE_UNREGISTERED
    sim.free(d)
    sim.free(d3)
    sim.free_host(h)
    assert sim.attrs(d + 10)[0] == ACL_MEM_LOCATION_TYPE_UNREGISTERED
    assert sim.attrs(h + 10)[0] == ACL_MEM_LOCATION_TYPE_UNREGISTERED
    a = PtrAttributes()
    assert sim.lib.aclrtPointerGetAttributes(None, byref(a)) == ACL_ERROR_INVALID_PARAM
    assert sim.lib.aclrtPointerGetAttributes(d3, None) == ACL_ERROR_INVALID_PARAM
    sim.set_device(0)


def test_bad_frees_are_errors_not_crashes(dev0):
    sim = dev0
    lib = sim.lib
    p = sim.malloc(8192)
    assert lib.aclrtFree(p + 64) == ACL_ERROR_INVALID_PARAM
    assert "inside the allocation" in sim.err()
    sim.free(p)
    assert lib.aclrtFree(p) == ACL_ERROR_INVALID_PARAM
    assert "not a live allocation" in sim.err()
    assert lib.aclrtFree(None) == ACL_ERROR_INVALID_PARAM
    host = ctypes.create_string_buffer(16)
    assert lib.aclrtFree(ctypes.addressof(host)) == ACL_ERROR_INVALID_PARAM
    assert "not device memory" in sim.err()
    h = sim.malloc_host(4096)
    assert lib.aclrtFreeHost(h + 8) == ACL_ERROR_INVALID_PARAM
    sim.free_host(h)
    assert lib.aclrtFreeHost(h) == ACL_ERROR_INVALID_PARAM
    q = c_void_p()
    assert lib.aclrtMalloc(byref(q), 0, 0) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtMalloc(None, 16, 0) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtMallocHost(byref(q), 0) == ACL_ERROR_INVALID_PARAM


def test_calls_needing_a_device_fail_on_a_fresh_thread(sim):
    results = {}

    def fresh_thread():
        p = c_void_p()
        results["malloc"] = sim.lib.aclrtMalloc(byref(p), 4096, 0)
        results["message"] = sim.err()
        s = c_void_p()
        results["stream"] = sim.lib.aclrtCreateStream(byref(s))
        results["sync"] = sim.lib.aclrtSynchronizeDevice()
        results["default"] = sim.lib.aclrtSynchronizeStream(None)

    t = threading.Thread(target=fresh_thread)
    t.start()
    t.join()
    assert results["malloc"] == ACL_ERROR_RT_CONTEXT_NULL
    assert "aclrtSetDevice" in results["message"]
    assert results["stream"] == results["sync"] == results["default"] == ACL_ERROR_RT_CONTEXT_NULL


@pytest.mark.parametrize("size", [1, 4096, 100_000, 5 * MiB])
def test_host_memory_is_page_aligned_and_usable(sim, size):
    h = sim.malloc_host(size)
    assert h % 4096 == 0
    ctypes.memset(h, 0x3C, size)
    assert ctypes.string_at(h + size - 1, 1) == b"\x3c"
    sim.free_host(h)


def test_many_threads_allocate_concurrently(dev0):
    sim = dev0
    free0 = sim.mem_info()[0]
    errors = []

    def worker(seed):
        try:
            sim.set_device(0)
            for i in range(200):
                p = sim.malloc(4096 * (1 + (seed + i) % 7))
                assert sim.attrs(p + 100)[0] == ACL_MEM_LOCATION_TYPE_DEVICE
                sim.free(p)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sim.mem_info()[0] == free0
    assert PARAM_ERRORS  # keep the import used
