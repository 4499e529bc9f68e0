"""Thread start-up, process exit and fork()."""

import time


def test_threads_start_only_with_device_work(runner):
    result = runner.ok("""
        def threads():
            return len(os.listdir("/proc/self/task"))
        base = threads()
        assert lib.aclInit(None) == 0
        n = ctypes.c_uint32()
        assert lib.aclrtGetDeviceCount(ctypes.byref(n)) == 0
        after_init = threads()
        sim.set_device(0)
        after_set = threads()
        s = sim.create_stream()
        p = sim.malloc(4096)
        after_create = threads()
        sim.h2d(p, b"x" * 16)          # default stream: first work starts its worker
        sim.sync()
        after_default = threads()
        sim.launch(lambda: 0, s)        # second stream, second worker
        sim.sync(s)
        after_stream = threads()
        sim.destroy_stream(s)
        # join() returns when the worker has exited, but the kernel may list
        # the exiting thread in /proc a moment longer.
        deadline = time.time() + 5
        while threads() != after_stream - 1 and time.time() < deadline:
            time.sleep(0.01)
        after_destroy = threads()
        print(base, after_init, after_set, after_create, after_default, after_stream, after_destroy)
    """)
    base, init, setd, create, default, stream, destroy = map(int, result.stdout.split())
    counts = result.stdout.strip()
    assert init == base and setd == base and create == base, counts
    assert default == base + 1, counts
    assert stream == base + 2, counts
    assert destroy == base + 1, counts


def test_exit_with_queued_and_running_work_is_quick(runner):
    start = time.monotonic()
    result = runner.ok("""
        sim.set_device(0)
        p = sim.malloc(1 << 20)
        s = sim.create_stream()
        import threading
        running = threading.Event()
        sim.launch(lambda: running.set() or time.sleep(10) or 0, s)
        for i in range(1000):
            lib.aclrtMemsetAsync(p, 1 << 20, i, 1 << 20, s)
        sim.h2d(p, b"y" * 64)
        # The work must be inside its sleep before the interpreter finalises:
        # a ctypes callback that only starts then crashes CPython itself
        # (PyGILState_Ensure after the interpreter is gone).
        assert running.wait(10)
        print("leaving")
    """)
    assert result.stdout.strip() == "leaving"
    assert time.monotonic() - start < 5  # the 10 s work is abandoned, not awaited


def test_forked_child_cannot_use_an_initialised_simulator(runner):
    runner.ok("""
        sim.set_device(0)
        p = sim.malloc(4096)
        sim.launch(lambda: 0)
        sim.sync()
        pid = os.fork()
        if pid == 0:
            q = ctypes.c_void_p()
            rc = lib.aclrtMalloc(ctypes.byref(q), 4096, 0)
            msg = sim.err()
            ok = rc == ACL_ERROR_RT_FAILURE and "fork()" in msg and "spawn" in msg
            sys.exit(0 if ok else 3)     # normal exit: atexit handlers must not hang
        deadline = time.time() + 10
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            assert time.time() < deadline, "child hung"
            time.sleep(0.01)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        sim.sync()                        # the parent is unaffected
    """)


def test_fork_before_any_device_is_initialised_is_fine(runner):
    runner.ok("""
        assert sim.device_count() == 8
        pid = os.fork()
        if pid == 0:
            sim.set_device(0)
            p = sim.malloc(4096)
            sim.h2d(p, b"abc")
            sim.sync()
            os._exit(0 if sim.d2h(p, 3, sync=True).raw == b"abc" else 3)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    """)
