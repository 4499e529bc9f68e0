"""Note [Python meta kernels and the first op] (csrc/PythonMetaWarmup.h):
the first executor op starts the imports torch's Python meta kernels need on
a background thread, ops run synchronously until they are done, and views
stay views meanwhile."""

from __future__ import annotations

import json

# Each test runs in a fresh process with the warm-up on (conftest turns it
# off for the other tests).
WARMUP_ON = {"TORCH_NPU_META_WARMUP": "1"}


def test_first_ops_run_synchronously_while_the_imports_run_then_asynchronously(python_subprocess_env):
    code = """
        import json, sys, threading, torch, torch_npu
        x = torch.randn(2, 3, 8, 8).npu()
        w = torch.randn(4, 3, 3, 3).npu()
        assert "torch._dynamo" not in sys.modules
        torch_npu.ops.reset_execution_counters()
        y = torch.nn.functional.conv2d(x, w)  # the first executor op
        first = torch_npu.ops.synchronous_ops()
        warmup = [t for t in threading.enumerate() if t.name == "torch_npu-meta-warmup"]
        warmup[0].join()
        torch_npu.ops.reset_execution_counters()
        z = torch.nn.functional.conv2d(x, w)
        print(json.dumps({"first": first, "after": torch_npu.ops.synchronous_ops(),
                          "imported": "torch._dynamo" in sys.modules,
                          "equal": torch.equal(y.cpu(), z.cpu()),
                          "cpu": torch.equal(y.cpu(), torch.nn.functional.conv2d(x.cpu(), w.cpu()))}))
    """
    result = python_subprocess_env(code, WARMUP_ON)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["first"] == {"aten::convolution": 1}  # ran synchronously: no meta kernel yet
    assert out["after"] == {} and out["imported"]  # then queued, shaped by the meta kernel
    assert out["equal"] and out["cpu"]


def test_views_stay_views_during_the_warmup(python_subprocess_env):
    # The synchronous path would return a copy: views wait for the meta kernel.
    code = """
        import torch, torch_npu
        c = torch.tensor([1 + 2j, -1j], dtype=torch.complex64).npu()
        real = torch.view_as_real(c)  # among the first executor ops
        real.mul_(2)
        print(c.cpu().tolist())
    """
    result = python_subprocess_env(code, WARMUP_ON)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[(2+4j), (-0-2j)]"  # the value doubled in place, through the view


def test_fork_waits_for_the_imports(python_subprocess_env):
    code = """
        import os, threading, torch, torch_npu
        torch.nn.functional.conv2d(torch.ones(1, 1, 3, 3).npu(), torch.ones(1, 1, 2, 2).npu())
        pid = os.fork()
        if pid == 0:
            import torch.fx.experimental.symbolic_shapes  # would hang on a lock held by the thread
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """
    result = python_subprocess_env(code, WARMUP_ON)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"


def test_the_warmup_can_be_turned_off(python_subprocess_env):
    code = """
        import threading, torch, torch_npu
        torch_npu.ops.reset_execution_counters()
        torch.nn.functional.conv2d(torch.ones(1, 1, 3, 3).npu(), torch.ones(1, 1, 2, 2).npu())
        print(torch_npu.ops.synchronous_ops(), [t.name for t in threading.enumerate() if "warmup" in t.name])
    """
    result = python_subprocess_env(code, {"TORCH_NPU_META_WARMUP": "0"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "{} []"


def test_a_torch_import_on_another_thread_waits_for_the_warmup(python_subprocess_env):
    # Note [Imports beside the warm-up]: torch.compile enters torch's import
    # cycle at torch._inductor while the warm-up is inside torch._dynamo;
    # unordered, one of them got a partially initialised module about one
    # run in six. Here the main thread's import returns only once the
    # warm-up is done, and the import hooks are gone with it.
    code = """
        import builtins, importlib, json, sys, threading, torch, torch_npu
        plain_import, plain_import_module = builtins.__import__, importlib.import_module
        x = torch.ones(4).npu()  # the first device use starts the warm-up
        warmup = [t for t in threading.enumerate() if t.name == "torch_npu-meta-warmup"]
        alive_before = bool(warmup) and warmup[0].is_alive()
        hooked = builtins.__import__ is not plain_import and importlib.import_module is not plain_import_module
        import torch._inductor.compiler_bisector  # where torch.compile enters
        alive_after = warmup[0].is_alive()
        compiled = torch.compile(lambda t: t * 2 + 1)(torch.ones(4))
        print(json.dumps({"alive_before": alive_before, "hooked": hooked, "alive_after": alive_after,
                          "restored": builtins.__import__ is plain_import
                                      and importlib.import_module is plain_import_module,
                          "sum": compiled.sum().item()}))
    """
    result = python_subprocess_env(code, WARMUP_ON)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["alive_before"] and out["hooked"]
    assert not out["alive_after"] and out["restored"]
    assert out["sum"] == 12.0
