"""Process-level behaviour: autoload, fork, the memory checker, collect_env."""

from __future__ import annotations


def test_import_torch_alone_loads_torch_npu(python_subprocess):
    result = python_subprocess(
        "import torch; print(torch.ones(2).npu().device, 'torch_npu' in __import__('sys').modules)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["npu:0", "True"]


def test_autoload_can_be_disabled(python_subprocess):
    result = python_subprocess(
        "import sys, torch; print('torch_npu' in sys.modules)",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert result.stdout.strip() == "False", result.stderr


def test_fork_after_init_gives_the_spawn_message(python_subprocess):
    code = """
        import multiprocessing as mp
        import torch, torch_npu

        def child(queue):
            try:
                torch.ones(1).npu()
                queue.put("no error")
            except RuntimeError as error:
                queue.put(str(error))

        if __name__ == "__main__":
            torch.ones(1).npu()
            ctx = mp.get_context("fork")
            queue = ctx.Queue()
            p = ctx.Process(target=child, args=(queue,))
            p.start()
            print(queue.get(timeout=60))
            p.join()
            print("parent ok", torch.ones(2).npu().cpu().tolist())
    """
    result = python_subprocess(code)
    assert result.returncode == 0, result.stderr
    assert "Cannot re-initialize NPU in forked subprocess" in result.stdout
    assert "'spawn' start method" in result.stdout
    assert "parent ok [1.0, 1.0]" in result.stdout


def test_fork_before_init_is_fine(python_subprocess):
    code = """
        import multiprocessing as mp
        import torch, torch_npu

        def child(queue):
            queue.put(torch.full((2,), 3.0).npu().cpu().tolist())

        if __name__ == "__main__":
            ctx = mp.get_context("fork")
            queue = ctx.Queue()
            p = ctx.Process(target=child, args=(queue,))
            p.start()
            print(queue.get(timeout=60))
            p.join()
    """
    result = python_subprocess(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[3.0, 3.0]"


def test_checker_reports_host_access_to_device_memory(python_subprocess):
    code = """
        import ctypes, torch, torch_npu
        t = torch.ones(16).npu()
        torch.npu.synchronize()
        print("device work fine", t.cpu().sum().item(), flush=True)
        ctypes.string_at(t.data_ptr(), 4)
        print("unreachable")
    """
    result = python_subprocess(code, env={"NPU_SIM_CHECKER": "1"})
    assert result.returncode != 0
    assert "device work fine 16.0" in result.stdout
    assert "unreachable" not in result.stdout
    assert "host code read or wrote NPU device memory" in result.stderr


def test_without_checker_device_memory_is_plain_host_memory(python_subprocess):
    code = """
        import ctypes, torch, torch_npu
        t = torch.ones(4).npu(); torch.npu.synchronize()
        print(len(ctypes.string_at(t.data_ptr(), 16)))
    """
    result = python_subprocess(code, env={"NPU_SIM_CHECKER": "0"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "16"


def test_backend_can_be_forced(python_subprocess):
    result = python_subprocess(
        "import torch, torch_npu; print(torch_npu._C._backend_info()['backend'])",
        env={"TORCH_NPU_BACKEND": "simulator"},
    )
    assert result.stdout.strip() == "simulator", result.stderr
    result = python_subprocess(
        "import torch, torch_npu; torch.npu.device_count(); torch.ones(1).npu()",
        env={"TORCH_NPU_BACKEND": "cann", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert result.returncode != 0
    assert "libascendcl.so" in result.stderr and "set_env.sh" in result.stderr


def test_this_process_runs_the_checker_when_asked():
    # ./dev test exports NPU_SIM_CHECKER=1: the simulator torch_npu uses in
    # this very process must then guard device memory.
    import os

    import torch_npu

    description = torch_npu._C._backend_info()["description"]
    expected = "checker=on" if os.environ.get("NPU_SIM_CHECKER") == "1" else "checker=off"
    assert expected in description, description


def test_exit_right_after_backward_on_npu_does_not_abort(python_subprocess):
    # PyTorch's autograd device thread may drop its last graph task (and a
    # Python object in it) while the interpreter finalises, which aborted
    # the process in about one run in seven (pytorch/pytorch#190489);
    # torch_npu drains those threads at exit. Several runs, as the race is
    # one of timing; the drain itself is checked directly too.
    code = """
        import torch, torch_npu
        from torch_npu import _autograd_exit
        leaf = torch.zeros(3, device="npu", requires_grad=True)
        leaf.to("cpu").sum().backward()
        _autograd_exit._drain_device_threads()
        # Devices without memory are left alone (no context made at exit).
        print(torch.npu.memory_reserved(1) == 0 and torch.npu.max_memory_reserved(1) == 0)
        leaf.to("cpu").sum().backward()
    """
    for _ in range(4):
        result = python_subprocess(code, env={"NPU_SIM_DEVICE_COUNT": "2"})
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.strip() == "True"
