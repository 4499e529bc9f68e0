"""Device memory shared between processes: aclrtIpcMemGetExportKey,
aclrtIpcMemImportByKey, aclrtIpcMemSetImportPid, aclrtIpcMemClose
(Note [IPC memory], csrc/simulator/ipc_memory.h).

The exporter is the test process's private simulator (checker off, so an
aclrtMalloc allocation starts as anonymous memory and moves to shareable
pages at its export); importers are fresh processes.
"""

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from ctypes import byref, c_int32, c_void_p

import pytest
from _simlib import (
    ACL_ERROR_INVALID_PARAM,
    ACL_EVENT_IPC,
    ACL_EVENT_RECORDED_STATUS_COMPLETE,
    ACL_EVENT_RECORDED_STATUS_NOT_READY,
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
    ACL_MEM_LOCATION_TYPE_DEVICE,
    ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT,
    IPC_KEY_LEN,
    MiB,
    AclError,
    IpcEventHandle,
    PhysicalMemProp,
    MemLocation,
    Sim,
    load,
)
from _simrunner import SIM_ENV_VARS, TESTS_DIR, Runner

PATTERN = bytes(range(256)) * 64  # 16 KiB


def physical(sim, size):
    h = c_void_p()
    prop = PhysicalMemProp(0, 0, 1, MemLocation(0, ACL_MEM_LOCATION_TYPE_DEVICE), 0)
    sim.check("aclrtMallocPhysical", sim.lib.aclrtMallocPhysical(byref(h), size, byref(prop), 0))
    return h.value


def reserve(sim, size):
    p = c_void_p()
    sim.check("aclrtReserveMemAddress", sim.lib.aclrtReserveMemAddress(byref(p), size, 0, None, 0))
    return p.value


# An importer: imports $KEY on device 0, checks it reads $EXPECT (hex) and
# is device memory, writes $WRITE (hex) at its start, then closes it.
IMPORTER = """
    key = os.environ["KEY"].encode()
    sim.set_device(0)
    p = sim.ipc_import(key)
    kind, device = sim.attrs(p)
    assert (kind, device) == (ACL_MEM_LOCATION_TYPE_DEVICE, 0), (kind, device)
    expect = bytes.fromhex(os.environ["EXPECT"])
    got = sim.d2h(p, len(expect), sync=True).raw
    assert got == expect, "imported memory differs"
    sim.h2d(p, bytes.fromhex(os.environ["WRITE"]), sync=True)
    sim.ipc_close(key)
    try:
        sim.ipc_close(key)
    except AclError as e:
        assert "not a key this process exported or imported" in e.message, e.message
    else:
        raise AssertionError("closing twice succeeded")
    print("imported", hex(p))
"""


def import_error(runner, key, **env):
    """Runs an importer of `key` that must fail; returns its message."""
    result = runner.ok(
        """
        sim.set_device(0)
        try:
            sim.ipc_import(os.environ["KEY"].encode())
        except AclError as e:
            print("ERROR", e.code, e.message)
        else:
            print("IMPORTED")
        """,
        KEY=key.decode() if isinstance(key, bytes) else key,
        **env,
    )
    assert result.stdout.startswith("ERROR"), result.stdout
    code, message = result.stdout.split(" ", 2)[1:]
    assert int(code) == ACL_ERROR_INVALID_PARAM
    return message


def test_importer_shares_the_exporters_heap_memory(dev0, runner):
    sim = dev0
    p = sim.malloc(3 * 4096 + 100)
    sim.h2d(p, PATTERN[: 3 * 4096 + 100], sync=True)
    # A range in the middle of the allocation: the import points at its
    # first byte, not at the page.
    key = sim.ipc_export(p + 100, 8000)
    assert key.startswith(b"npusim-ipc-") and len(key) < IPC_KEY_LEN
    # Exporting moved the pages; the exporter's data is intact.
    assert sim.d2h(p, 3 * 4096 + 100, sync=True).raw == PATTERN[: 3 * 4096 + 100]
    runner.ok(IMPORTER, KEY=key.decode(), EXPECT=PATTERN[100:8100].hex(), WRITE="c0ffee" * 4)
    assert sim.d2h(p + 100, 12, sync=True).raw == bytes.fromhex("c0ffee" * 4)
    assert sim.d2h(p + 112, 100, sync=True).raw == PATTERN[112:212]
    sim.ipc_close(key)
    assert "no such export" in import_error(runner, key)
    sim.free(p)


@pytest.fixture(scope="module")
def shared_heap_dev0(lib_path, tmp_path_factory):
    """Another private copy of the library, whose aclrtMalloc memory is the
    memfd from the start (NPU_SIM_DEVICE_HEAP=shared, as in the ranks of a
    multi-process job: Note [Device heap kind]), device 0 current."""
    private = tmp_path_factory.mktemp("npu_sim_shared_heap") / "libnpu_sim_shared_heap.so"
    shutil.copy2(lib_path, private)
    saved = {name: os.environ.pop(name) for name in SIM_ENV_VARS if name in os.environ}
    os.environ["NPU_SIM_DEVICE_HEAP"] = "shared"
    try:
        s = Sim(load(str(private)))
        s.set_device(0)
    finally:
        del os.environ["NPU_SIM_DEVICE_HEAP"]
        os.environ.update(saved)
    return s


@pytest.mark.parametrize("exporter", ["dev0", "shared_heap_dev0"])
def test_export_stays_shareable_and_free_revokes_it(exporter, runner, request):
    sim = request.getfixturevalue(exporter)
    sim.set_device(0)  # on this thread
    p = sim.malloc(4096)
    sim.h2d(p, b"\x11" * 4096, sync=True)
    first = sim.ipc_export(p, 4096)
    second = sim.ipc_export(p, 4096)  # the pages moved once; both keys share them
    assert first != second
    runner.ok(IMPORTER, KEY=second.decode(), EXPECT="11" * 4096, WRITE="22" * 8)
    assert sim.d2h(p, 9, sync=True).raw == b"\x22" * 8 + b"\x11"
    sim.free(p)
    # Freeing revokes every key of the memory; the memory that replaces it
    # is ordinary again.
    assert "no such export" in import_error(runner, first)
    with pytest.raises(AclError, match="not a key this process exported"):
        sim.ipc_close(first)
    q = sim.malloc(4096)
    sim.h2d(q, b"\x33" * 4096, sync=True)
    assert sim.d2h(q, 4096, sync=True).raw == b"\x33" * 4096
    sim.free(q)


def test_virtual_memory_spanning_two_handles_is_shared(dev0, runner):
    sim = dev0
    va = reserve(sim, 4 * MiB)
    handles = [physical(sim, 2 * MiB), physical(sim, 2 * MiB)]
    for i, h in enumerate(handles):
        sim.check("aclrtMapMem", sim.lib.aclrtMapMem(va + i * 2 * MiB, 2 * MiB, 0, h, 0))
    start = va + 2 * MiB - 4096 - 10  # crosses from the first handle into the second
    data = PATTERN[: 8192 + 20]
    sim.h2d(start, data, sync=True)
    key = sim.ipc_export(start, len(data))
    runner.ok(IMPORTER, KEY=key.decode(), EXPECT=data.hex(), WRITE="ab" * 32)
    assert sim.d2h(start, 40, sync=True).raw == b"\xab" * 32 + data[32:40]
    sim.ipc_close(key)
    for i, h in enumerate(handles):
        sim.check("aclrtUnmapMem", sim.lib.aclrtUnmapMem(va + i * 2 * MiB))
        sim.check("aclrtFreePhysical", sim.lib.aclrtFreePhysical(h))
    sim.check("aclrtReleaseMemAddress", sim.lib.aclrtReleaseMemAddress(va))


def test_imported_memory_is_not_virtual_memory_of_the_importer(dev0):
    sim = dev0
    p = sim.malloc(4096)
    key = sim.ipc_export(p, 4096)
    q = sim.ipc_import(key)  # the exporter itself may import: a second mapping
    sim.h2d(q, b"\x44" * 16, sync=True)
    assert sim.d2h(p, 16, sync=True).raw == b"\x44" * 16
    for release in (sim.lib.aclrtUnmapMem, sim.lib.aclrtReleaseMemAddress):
        assert release(q) == ACL_ERROR_INVALID_PARAM
        assert "aclrtIpcMemClose" in sim.err()
    with pytest.raises(AclError, match="already imported by this process"):
        sim.ipc_import(key)
    sim.ipc_close(key)  # the import
    sim.ipc_close(key)  # the export
    sim.free(p)


def test_export_arguments(dev0):
    sim = dev0
    p = sim.malloc(4096)
    lib = sim.lib
    buf = ctypes.create_string_buffer(IPC_KEY_LEN)
    cases = [
        ((None, 16, buf, IPC_KEY_LEN, 0), "devPtr is null"),
        ((p, 0, buf, IPC_KEY_LEN, 0), "size is 0"),
        ((p, 16, buf, 32, 0), "needs 65"),
        ((p, 16, buf, IPC_KEY_LEN, 7), "unknown flags"),
        ((p, 8192, buf, IPC_KEY_LEN, 0), "runs past the end"),
        ((p + (1 << 40), 16, buf, IPC_KEY_LEN, 0), "not device memory"),
    ]
    for args, message in cases:
        assert lib.aclrtIpcMemGetExportKey(*args) == ACL_ERROR_INVALID_PARAM, message
        assert message in sim.err()
    for bad in (b"", b"hello", b"npusim-ipc-1-2", b"npusim-ipc-1-2-zz"):
        out = c_void_p()
        assert lib.aclrtIpcMemImportByKey(byref(out), bad, 0) == ACL_ERROR_INVALID_PARAM
        assert "key" in sim.err()
    assert lib.aclrtIpcMemClose(b"npusim-ipc-1-2-3") == ACL_ERROR_INVALID_PARAM
    pid = c_int32()
    sim.check("aclrtDeviceGetBareTgid", lib.aclrtDeviceGetBareTgid(byref(pid)))
    assert pid.value == os.getpid()
    sim.free(p)


def test_unknown_keys_fail_clearly(dev0, runner):
    sim = dev0
    p = sim.malloc(4096)
    key = sim.ipc_export(p, 4096).decode()
    prefix, nonce = key.rsplit("-", 1)
    wrong_nonce = f"{prefix}-{int(nonce, 16) ^ 1:016x}"
    assert "no such export" in import_error(runner, wrong_nonce)
    pid = int(key.split("-")[2])
    assert "no such export" in import_error(runner, key.replace(f"-{pid}-", f"-{pid}-9"))
    # A process that has exited.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    assert "has exited" in import_error(runner, key.replace(f"-{pid}-", f"-{gone}-"))
    sim.ipc_close(key.encode())
    sim.free(p)


def test_pid_validation(dev0, runner):
    """Exported with the default flags, only processes the exporter allowed
    (aclrtIpcMemSetImportPid) import."""
    sim = dev0
    p = sim.malloc(4096)
    sim.h2d(p, b"\x55" * 4096, sync=True)
    key = sim.ipc_export(p, 4096, flags=ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)
    assert "may not import" in import_error(runner, key)
    # An importer that tells its pid, then imports once allowed.
    code = Runner.PRELUDE.format(tests=str(TESTS_DIR)) + textwrap.dedent("""
        pid = ctypes.c_int32()
        sim.check("aclrtDeviceGetBareTgid", lib.aclrtDeviceGetBareTgid(ctypes.byref(pid)))
        print(pid.value, flush=True)
        sys.stdin.readline()
        sim.set_device(0)
        q = sim.ipc_import(os.environ["KEY"].encode())
        print(sim.d2h(q, 4, sync=True).raw.hex(), flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=runner.env(KEY=key.decode()))
    try:
        child_pid = int(child.stdout.readline())
        with pytest.raises(AclError, match="not a pid"):
            sim.ipc_allow(key, 0)
        sim.ipc_allow(key, child_pid)
        out, err = child.communicate("go\n", timeout=60)
    finally:
        child.kill()
    assert child.returncode == 0, err
    assert out.strip() == "55" * 4
    sim.ipc_close(key)
    sim.free(p)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run an importer as another user")
def test_another_user_cannot_import(dev0, runner):
    sim = dev0
    p = sim.malloc(4096)
    key = sim.ipc_export(p, 4096)
    result = runner.ok(
        """
        sim.set_device(0)
        os.setuid(65534)  # after loading the library: as user nobody from here on
        try:
            sim.ipc_import(os.environ["KEY"].encode())
        except AclError as e:
            print(e.message)
        """,
        KEY=key.decode(),
    )
    assert "of user 0" in result.stdout and "same user" in result.stdout, result.stdout
    sim.ipc_close(key)
    sim.free(p)


def test_sharing_under_the_memory_checker(runner):
    """With the checker, device addresses are not host accessible in either
    process; the import still maps the same pages."""
    importer = Runner.PRELUDE.format(tests=str(TESTS_DIR)) + textwrap.dedent(IMPORTER)
    result = runner.ok(
        f"""
        import subprocess
        sim.set_device(0)
        p = sim.malloc(8192)
        sim.h2d(p, b"\\x66" * 8192, sync=True)
        key = sim.ipc_export(p, 8192)
        env = dict(os.environ, KEY=key.decode(), EXPECT="66" * 8192, WRITE="77" * 4)
        child = subprocess.run([sys.executable, "-c", {importer!r}], env=env,
                               capture_output=True, text=True)
        assert child.returncode == 0, child.stderr
        print(sim.d2h(p, 5, sync=True).raw.hex())
        """,
        NPU_SIM_CHECKER=1,
    )
    assert result.stdout.strip() == "77" * 4 + "66"


def test_ipc_memory_is_gated_by_the_emulated_cann_version(runner):
    result = runner.ok(
        """
        sim.set_device(0)
        p = sim.malloc(4096)
        key = ctypes.create_string_buffer(IPC_KEY_LEN)
        print(lib.aclrtIpcMemGetExportKey(p, 4096, key, IPC_KEY_LEN, 1))
        print(sim.err())
        """,
        NPU_SIM_CANN_VERSION="8.2.RC1",
    )
    code, message = result.stdout.split("\n", 1)
    assert int(code) == ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    assert "8.3.RC1" in message and "8.2.RC1" in message


# ---- events (Note [IPC events], csrc/simulator/ipc_event.h) ----

def event_handle(sim, event):
    handle = IpcEventHandle()
    sim.check("aclrtIpcGetEventHandle", sim.lib.aclrtIpcGetEventHandle(event, byref(handle)))
    return handle.reserved


def test_a_stream_of_another_process_waits_for_an_ipc_event(dev0, runner):
    """The importer's stream copies shared memory only after the exporter's
    work before the record ran, writing it."""
    sim = dev0
    p = sim.malloc(4096)
    sim.h2d(p, b"\x00" * 4096, sync=True)
    key = sim.ipc_export(p, 4096)
    event = sim.create_event(ACL_EVENT_IPC)
    handle = event_handle(sim, event)
    assert handle.startswith(b"npusim-ipcevt-")
    code = Runner.PRELUDE.format(tests=str(TESTS_DIR)) + textwrap.dedent("""
        sim.set_device(0)
        q = sim.ipc_import(os.environ["KEY"].encode())
        handle = IpcEventHandle(os.environ["HANDLE"].encode())
        ev = ctypes.c_void_p()
        sim.check("open", lib.aclrtIpcOpenEventHandle(handle, ctypes.byref(ev)))
        assert lib.aclrtRecordEvent(ev, None) == ACL_ERROR_INVALID_PARAM
        assert "only the process that created it records it" in sim.err()
        print(sim.event_status(ev), flush=True)
        sys.stdin.readline()
        s = sim.create_stream()
        sim.wait_event(s, ev)
        out = sim.d2h(q, 4, stream=s)
        sim.sync(s)
        sim.check("sync", lib.aclrtSynchronizeEvent(ev))
        print(sim.event_status(ev), out.raw.hex(), flush=True)
        sim.check("destroy", lib.aclrtDestroyEvent(ev))
    """)
    s = sim.create_stream()
    gate = threading.Event()
    sim.launch(lambda: 0 if gate.wait(60) else 1, s)
    sim.h2d(p, b"\x42" * 4, stream=s)
    sim.record(event, s)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=runner.env(KEY=key.decode(), HANDLE=handle.decode()))
    try:
        assert child.stdout.readline().strip() == str(ACL_EVENT_RECORDED_STATUS_NOT_READY)
        child.stdin.write("go\n")
        child.stdin.flush()
        gate.set()
        out, err = child.communicate(timeout=60)
    finally:
        gate.set()
        child.kill()
    assert child.returncode == 0, err
    assert out.split() == [str(ACL_EVENT_RECORDED_STATUS_COMPLETE), "42" * 4]
    sim.sync(s)
    sim.ipc_close(key)
    sim.free(p)


def test_ipc_event_handles_are_checked(dev0, runner):
    sim = dev0
    plain = sim.create_event()
    out = IpcEventHandle()
    assert sim.lib.aclrtIpcGetEventHandle(plain, byref(out)) == ACL_ERROR_INVALID_PARAM
    assert "ACL_EVENT_IPC" in sim.err()
    ev = c_void_p()
    assert sim.lib.aclrtIpcOpenEventHandle(IpcEventHandle(b"nonsense"), byref(ev)) == ACL_ERROR_INVALID_PARAM
    assert "not a handle" in sim.err()
    event = sim.create_event(ACL_EVENT_IPC)
    assert event_handle(sim, event) == event_handle(sim, event)  # one shared state per event
    handle = event_handle(sim, event).decode()
    prefix, nonce = handle.rsplit("-", 1)
    result = runner.ok(
        """
        sim.set_device(0)
        ev = ctypes.c_void_p()
        rc = lib.aclrtIpcOpenEventHandle(IpcEventHandle(os.environ["HANDLE"].encode()), ctypes.byref(ev))
        print(rc, sim.err())
        """,
        HANDLE=f"{prefix}-{int(nonce, 16) ^ 1:016x}",
    )
    assert result.stdout.startswith(str(ACL_ERROR_INVALID_PARAM)) and "unknown" in result.stdout
