"""The generic device executor: results, paths, asynchrony, errors."""

from __future__ import annotations

import inspect
import threading
import time

import pytest
import torch
import torch.nn.functional as F

import torch_npu
import torch_npu.ops

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32]


def npu(t: torch.Tensor) -> torch.Tensor:
    return t.npu()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_pointwise_and_reductions_match_cpu(dtype):
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(5, 7, generator=g) * 10).to(dtype)
    b = (torch.randn(5, 7, generator=g) * 10).to(dtype)
    checks = [
        lambda x, y: x + y,
        lambda x, y: x * y - 3,
        lambda x, y: torch.maximum(x, y),
        lambda x, y: (x > y),
        lambda x, y: x.sum(dim=1),
        lambda x, y: x.abs().amax(),
        lambda x, y: torch.where(x > 0, x, y),
        lambda x, y: x.t().contiguous(),
        lambda x, y: x[1:4, ::2] + y[1:4, ::2],
        lambda x, y: torch.cat([x, y], dim=0),
        lambda x, y: x.to(torch.float32).mean(dim=0),
    ]
    for fn in checks:
        expected = fn(a, b)
        actual = fn(npu(a), npu(b))
        assert actual.device.type == "npu"
        torch.testing.assert_close(actual.cpu(), expected)


def test_linear_algebra_and_nn_functions():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 8, generator=g)
    w = torch.randn(6, 8, generator=g)
    torch.testing.assert_close((npu(x) @ npu(w).t()).cpu(), x @ w.t())
    torch.testing.assert_close(F.linear(npu(x), npu(w)).cpu(), F.linear(x, w))
    torch.testing.assert_close(F.softmax(npu(x), dim=-1).cpu(), F.softmax(x, dim=-1))
    torch.testing.assert_close(F.layer_norm(npu(x), (8,)).cpu(), F.layer_norm(x, (8,)))
    img = torch.randn(2, 3, 9, 9, generator=g)
    k = torch.randn(4, 3, 3, 3, generator=g)
    torch.testing.assert_close(F.conv2d(npu(img), npu(k), padding=1).cpu(), F.conv2d(img, k, padding=1))
    torch.testing.assert_close(F.max_pool2d(npu(img), 2).cpu(), F.max_pool2d(img, 2))
    q = torch.randn(2, 2, 5, 4, generator=g)
    torch.testing.assert_close(
        F.scaled_dot_product_attention(npu(q), npu(q), npu(q), is_causal=True).cpu(),
        F.scaled_dot_product_attention(q, q, q, is_causal=True),
    )


def test_in_place_out_and_views_write_device_memory():
    x = torch.arange(12.0).npu()
    view = x.view(3, 4)[:, 1]
    view.mul_(10)
    assert x.cpu().tolist() == [0, 10, 2, 3, 4, 50, 6, 7, 8, 90, 10, 11]
    out = torch.empty(0, device="npu")
    torch.add(x, 1, out=out)  # out is resized by the op
    assert out.shape == (12,) and out.cpu()[0].item() == 1
    diag = x.view(3, 4).diagonal()
    assert diag.cpu().tolist() == [0.0, 50.0, 10.0]


def test_data_dependent_ops_wait_and_say_so():
    torch_npu.ops.reset_execution_counters()
    x = torch.tensor([0.0, 3.0, -1.0, 4.0]).npu()
    assert torch.nonzero(x).cpu().flatten().tolist() == [1, 2, 3]
    assert x[x > 0].cpu().tolist() == [3.0, 4.0]
    assert torch.unique(torch.tensor([3, 1, 3, 2]).npu()).cpu().tolist() == [1, 2, 3]
    assert torch.masked_select(x, x < 0).cpu().tolist() == [-1.0]
    sync_ops = torch_npu.ops.synchronous_ops()
    assert "aten::nonzero" in sync_ops and "aten::masked_select" in sync_ops
    counters = torch_npu.ops.execution_counters()
    assert counters["device_sync"] >= 4
    before = counters["device_async"]
    _ = x * 2
    assert torch_npu.ops.execution_counters()["device_async"] == before + 1


def test_host_returns_before_device_work_finishes():
    x = torch.randn(256, 256).npu()
    torch.npu._sleep(300 * torch.npu._cycles_per_ms())
    y = x @ x  # queued behind 300 ms of device work
    assert not torch.npu.current_stream().query()
    torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu())


def test_two_streams_with_real_compute_are_ordered_by_events():
    producer, consumer = torch.npu.Stream(), torch.npu.Stream()
    x = torch.ones(512, 512).npu()
    torch.npu.synchronize()
    for i in range(5):
        with torch.npu.stream(producer):
            torch.npu._sleep(10 * torch.npu._cycles_per_ms())
            y = x * (i + 2)
            done = producer.record_event()
        with torch.npu.stream(consumer):
            consumer.wait_event(done)
            z = y.sum()
        consumer.synchronize()
        assert z.cpu().item() == 512 * 512 * (i + 2)


def test_error_in_device_work_names_the_op_at_the_next_sync():
    x = torch.arange(4.0).npu()
    x.index_select(0, torch.tensor([1]).npu())  # a verified signature (Note [Errors at the call])
    bad = torch.tensor([7]).npu()
    y = x.index_select(0, bad)  # queued: the index is checked by the kernel
    line = inspect.currentframe().f_lineno - 1
    with pytest.raises(RuntimeError, match="index_select") as info:
        torch.npu.synchronize()
    assert "out of range" in str(info.value)
    # Raised far from the launching line, and names it.
    assert f"launched from {__file__}:{line})" in str(info.value)
    del y
    assert (x + 1).cpu().tolist() == [1.0, 2.0, 3.0, 4.0]  # the process keeps working


def test_asynchronous_errors_name_the_user_line_not_torch_internals():
    # F.embedding launches from torch/nn/functional.py: the line named is the
    # caller's. Two launches in one function name their own lines.
    table = torch.randn(4, 3).npu()

    def lookup(ids):
        first = F.embedding(torch.tensor([0]).npu(), table)
        second = F.embedding(ids, table)
        return first, second, inspect.currentframe().f_lineno - 1

    for _ in range(2):  # the second time from the site cache
        *_, line = lookup(torch.tensor([9]).npu())
        with pytest.raises(RuntimeError, match="out of range") as info:
            torch.npu.synchronize()
        assert f"launched from {__file__}:{line})" in str(info.value)


def test_errors_of_work_launched_by_another_python_thread_name_its_line():
    x = torch.arange(4.0).npu()
    x.index_select(0, torch.tensor([1]).npu())  # a verified signature (Note [Errors at the call])
    messages = []

    def worker():
        y = x.index_select(0, torch.tensor([9]).npu())  # noqa: F841
        messages.append(inspect.currentframe().f_lineno - 1)
        try:
            torch.npu.synchronize()
        except RuntimeError as error:
            messages.append(str(error))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    line, message = messages
    assert "out of range" in message
    assert f"launched from {__file__}:{line})" in message


def test_large_results_of_ops_without_an_out_kernel_match_cpu():
    # Convolution and embedding compute into host memory and the work copies
    # the result into the npu output (multithreaded, streaming stores from
    # 1 MiB on); sizes that are not a multiple of the copy's blocks too.
    x = torch.randn(2, 3, 131, 263)
    w = torch.randn(8, 3, 3, 3)  # a 2.2 MB result
    torch.testing.assert_close(F.conv2d(x.npu(), w.npu(), padding=1).cpu(), F.conv2d(x, w, padding=1))
    table = torch.randn(1000, 263)
    ids = torch.randint(0, 1000, (3, 997))  # 3.1 MB
    torch.testing.assert_close(F.embedding(ids.npu(), table.npu()).cpu(), F.embedding(ids, table), rtol=0, atol=0)


@pytest.mark.parametrize("size", [20, 600], ids=["small", "over-1MiB"])
def test_results_without_memory_or_with_odd_strides_are_copied_by_value(size):
    # sgn's backward for real inputs returns autograd's zero tensor, which
    # has no memory: the result copy must not read it as bytes. nonzero's
    # (n, 1) result has strides (1, n) but its bytes are in order.
    x = torch.randn(size, size)
    x_npu = x.npu().requires_grad_()
    (grad,) = torch.autograd.grad(torch.sgn(x_npu), x_npu, torch.ones(size, size).npu())
    torch.testing.assert_close(grad.cpu(), torch.zeros(size, size), rtol=0, atol=0)
    mask = x > 0
    torch.testing.assert_close(torch.nonzero(mask.npu()).cpu(), torch.nonzero(mask), rtol=0, atol=0)


def test_rng_ops_use_the_npu_generator_reproducibly():
    torch.npu.manual_seed(123)
    a = torch.randn(1000, device="npu").cpu()
    b = torch.randn(1000, device="npu").cpu()
    torch.npu.manual_seed(123)
    c = torch.randn(1000, device="npu").cpu()
    assert torch.equal(a, c) and not torch.equal(a, b)
    assert abs(a.mean().item()) < 0.15 and abs(a.std().item() - 1) < 0.15
    g = torch.Generator(device="npu").manual_seed(5)
    d = torch.rand(10, device="npu", generator=g).cpu()
    g.manual_seed(5)
    assert torch.equal(d, torch.rand(10, device="npu", generator=g).cpu())
    torch.npu.manual_seed(7)
    drop1 = F.dropout(torch.ones(100, device="npu"), 0.5).cpu()
    torch.npu.manual_seed(7)
    assert torch.equal(drop1, F.dropout(torch.ones(100, device="npu"), 0.5).cpu())


def test_printing_an_npu_tensor():
    text = repr(torch.tensor([1.5, 2.0]).npu())
    assert "device='npu:0'" in text and "1.5000" in text


def test_launch_blocking_reports_device_errors_at_the_call(python_subprocess_env):
    code = """
        import torch, torch_npu
        x = torch.arange(4.0).npu()
        x.index_select(0, torch.tensor([1]).npu())  # a verified signature
        try:
            x.index_select(0, torch.tensor([7]).npu())
            print("no error at the call")
        except IndexError as error:
            print("raised at the call:", error)
    """
    result = python_subprocess_env(code, {"ASCEND_LAUNCH_BLOCKING": "1"})
    assert result.returncode == 0, result.stderr
    assert "raised at the call: index out of range in self" in result.stdout


def test_strict_mode_refuses_an_op_that_would_run_synchronously(python_subprocess_env):
    # geqrf has no meta kernel: without one, the output shapes are known only
    # once the kernel ran, so the call would wait for the device.
    code = """
        import torch, torch_npu
        x = torch.randn(4, 3).npu()
        try:
            torch.geqrf(x)
            print("ran")
        except RuntimeError as error:
            print(error)
        print(torch.nonzero(x > 0).shape[1])  # data-dependent: still allowed
    """
    result = python_subprocess_env(code, {"TORCH_NPU_OPS_STRICT": "1"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("torch-npu-ops strict mode (TORCH_NPU_OPS_STRICT=1): aten::geqrf has no meta kernel")
    assert "Unset TORCH_NPU_OPS_STRICT to allow it." in lines[0]
    assert lines[1] == "2"


def test_strict_mode_allows_device_paths(python_subprocess_env):
    code = """
        import torch, torch_npu
        x = torch.tensor([1.0, -2.0, 3.0]).npu()
        print((x * 2).sum().item(), torch.nonzero(x > 0).cpu().flatten().tolist())
    """
    result = python_subprocess_env(code, {"TORCH_NPU_OPS_STRICT": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "4.0 [0, 2]"


def test_queued_work_does_not_hold_memory():
    # Memory freed by the host is reused in stream order (as on CUDA): a deep
    # queue of pending ops must not keep every intermediate alive.
    x = torch.randn(1 << 18).npu()  # 1 MiB
    torch.npu.synchronize()
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    torch.npu._sleep(200 * torch.npu._cycles_per_ms())
    for _ in range(50):
        y = x * 2
    assert not torch.npu.current_stream().query()  # all 50 still queued
    assert torch.npu.max_memory_allocated() - base <= 2 * (1 << 20)
    torch.testing.assert_close(y.cpu(), x.cpu() * 2)


def test_errors_raised_at_the_call_name_the_python_line():
    # The host waits for data-dependent ops, so their errors raise at the
    # call; the message names the Python line that launched the op.
    with pytest.raises(RuntimeError, match=r"launched from .*test_ops_execution\.py:\d+"):
        torch.repeat_interleave(torch.tensor([1, 2]).npu(), torch.tensor([-1, 1]).npu())


@torch.library.custom_op("npu_test::dispatch_state", mutates_args=(), device_types="cpu")
def _dispatch_state(x: torch.Tensor) -> torch.Tensor:
    """What a CPU kernel sees: CPU autocast and grad mode."""
    return torch.tensor([float(torch.is_autocast_enabled("cpu")), float(torch.is_grad_enabled())])


@pytest.mark.parametrize("idle_before", [0.0, 0.05], ids=["worker-awake", "worker-asleep"])
def test_kernels_run_in_the_cpus_dispatch_state_whichever_thread_runs_them(idle_before):
    # A synchronous op (no meta kernel here) may run on the waiting host
    # thread. Its CPU kernel must not see the host's CPU autocast (it is
    # part of an npu op, not a CPU op of the program), but does see the
    # caller's grad mode, as it would on the CPU.
    x = torch.ones(2).npu()
    for grad in (True, False):
        torch.npu.synchronize()
        time.sleep(idle_before)
        with torch.autocast("cpu", dtype=torch.bfloat16), torch.set_grad_enabled(grad):
            state = _dispatch_state(x)
        assert state.device.type == "npu"
        assert state.cpu().tolist() == [0.0, float(grad)]
