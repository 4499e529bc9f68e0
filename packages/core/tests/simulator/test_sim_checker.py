"""The memory checker (NPU_SIM_CHECKER=1)."""

import signal

import pytest

CRASH_MESSAGE = ("NPU simulator memory checker: host code read or wrote NPU device memory at 0x")


@pytest.mark.parametrize("access", ["read", "write"])
def test_host_access_to_device_memory_dies_with_a_clear_message(runner, access):
    body = """
        sim.set_device(1)
        p = sim.malloc(4096)
        sim.h2d(p, b"secret", sync=True)            # the simulator's own copies work
        assert sim.d2h(p, 6, sync=True).raw == b"secret"
        sys.stdout.write("before\\n"); sys.stdout.flush()
        ACCESS
    """.replace("ACCESS", "ctypes.string_at(p + 16, 4)" if access == "read"
                else "ctypes.memset(p + 16, 1, 4)")
    result = runner.run(body, NPU_SIM_CHECKER=1)
    assert result.stdout == "before\n", result.stderr
    assert result.returncode == -signal.SIGSEGV
    assert CRASH_MESSAGE in result.stderr
    assert "(npu:1, window offset 0x10)" in result.stderr
    assert "tensor.cpu()" in result.stderr and "NPU_SIM_CHECKER=1" in result.stderr


def test_device_work_without_the_offset_is_named(runner):
    result = runner.run("""
        sim.set_device(0)
        p = sim.malloc(4096)
        sim.launch(lambda: ctypes.memset(p, 0, 16) and 0, name=b"naughty_kernel")
        sim.sync()
    """, NPU_SIM_CHECKER=1)
    assert result.returncode == -signal.SIGSEGV
    assert "device work 'naughty_kernel'" in result.stderr
    assert "npuSimGetHostAccessOffset" in result.stderr


# Device work on several streams and devices at once, with copies, memsets,
# launched work that reads and writes device memory (heap and VMM) at
# address + npuSimGetHostAccessOffset(), and event ordering. Prints a digest.
WORKLOAD = """
    import hashlib
    delta = sim.delta()
    n = 256 * 1024
    results = []
    streams, buffers = [], []
    for k in range(4):
        sim.set_device(k % 2)
        streams.append(sim.create_stream())
        buffers.append((sim.malloc(n), sim.malloc(n)))
    ev = sim.create_event(0)
    for rnd in range(5):
        for k, s in enumerate(streams):
            a, b = buffers[k]
            sim.set_device(k % 2)
            sim.h2d(a, bytes((i * (k + 1) + rnd) % 251 for i in range(n)), stream=s)
            def kernel(a=a, b=b):
                data = bytearray(ctypes.string_at(a + delta, n))
                data.reverse()
                ctypes.memmove(b + delta, bytes(data), n)
                return 0
            sim.launch(kernel, s, name=b"reverse")
            lib.aclrtMemsetAsync(b, n, 0x7F, 64, s)
            sim.record(ev, s)
            sim.wait_event(streams[(k + 1) % 4], ev)
        for k, s in enumerate(streams):
            sim.sync(s)
            results.append(sim.d2h(buffers[k][1], n, sync=True).raw)
    # Virtual memory: two mappings of one handle, written by device work.
    sim.set_device(0)
    prop = PhysicalMemProp(0, 0, 1, MemLocation(0, 1), 0)
    va, h = ctypes.c_void_p(), ctypes.c_void_p()
    assert lib.aclrtReserveMemAddress(ctypes.byref(va), 4 * MiB, 0, None, 0) == 0
    assert lib.aclrtMallocPhysical(ctypes.byref(h), 2 * MiB, ctypes.byref(prop), 0) == 0
    assert lib.aclrtMapMem(va.value, 2 * MiB, 0, h.value, 0) == 0
    assert lib.aclrtMapMem(va.value + 2 * MiB, 2 * MiB, 0, h.value, 0) == 0
    sim.launch(lambda: ctypes.memset(va.value + delta, 0x42, 1000) and 0, name=b"fill")
    out = sim.d2h(va.value + 2 * MiB, 1000)
    sim.sync()
    assert out.raw == b"\x42" * 1000
    results.append(out.raw)
    print(len(results), hashlib.sha256(b"".join(results)).hexdigest())
    print("delta", delta != 0)
"""


def test_checker_and_normal_mode_give_identical_results(runner):
    checked = runner.ok(WORKLOAD, NPU_SIM_CHECKER=1).stdout.splitlines()
    normal = runner.ok(WORKLOAD).stdout.splitlines()
    assert checked[0] == normal[0]
    assert checked[0].startswith("21 ")
    assert checked[1] == "delta True" and normal[1] == "delta False"


def test_checker_rejects_host_access_aliases(runner):
    runner.ok("""
        sim.set_device(0)
        p = sim.malloc(4096)
        host = ctypes.create_string_buffer(16)
        assert lib.aclrtMemcpy(host, 16, p + sim.delta(), 16, DEFAULT) == ACL_ERROR_INVALID_PARAM
        assert "host-access alias" in sim.err()
        assert sim.attrs(p + sim.delta())[0] == ACL_MEM_LOCATION_TYPE_UNREGISTERED
        print(lib.npuSimDescribe().decode())
    """, NPU_SIM_CHECKER=1)
