"""The dedicated kernels (fast path): same results and geometry as the CPU,
asynchronous, errors where the CPU raises them, counted in the counters."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F

import torch_npu
import torch_npu.ops


def same_as_cpu(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.device.type == "npu"
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


def fast_path_count() -> int:
    return torch_npu.ops.execution_counters()["fast_path"]


G = torch.Generator().manual_seed(0)
F32 = torch.randn(4, 5, generator=G)
ROW = torch.randn(5, generator=G)
INTS = torch.randint(-5, 6, (4, 5), generator=G)
POS = torch.rand(4, 5, generator=G) + 0.1
CHANNELS_LAST = torch.randn(2, 3, 4, 5, generator=G).contiguous(memory_format=torch.channels_last)

FUNCTIONAL = {
    "add_broadcast": lambda a, b, i, p: a + b[0],
    "add_alpha": lambda a, b, i, p: torch.add(a, b[0], alpha=2.5),
    "sub_python_number": lambda a, b, i, p: a - 3,
    "rsub_python_number": lambda a, b, i, p: 3 - a,
    "mul_int_by_float_number": lambda a, b, i, p: i * 1.5,
    "mul_int_by_int": lambda a, b, i, p: i * i,
    "div_true_ints": lambda a, b, i, p: i / 2,
    "div_floor": lambda a, b, i, p: torch.div(a, p, rounding_mode="floor"),
    "div_trunc_ints": lambda a, b, i, p: torch.div(i, 2, rounding_mode="trunc"),
    "transposed_operand": lambda a, b, i, p: a.t() * p.t(),
    "strided_view": lambda a, b, i, p: a[:, ::2] + p[:, ::2],
    "zero_dim_npu_operand": lambda a, b, i, p: a * a[0, 0],
    "maximum": lambda a, b, i, p: torch.maximum(a, p),
    "pow_scalar": lambda a, b, i, p: p ** 2.5,
    "pow_tensor": lambda a, b, i, p: torch.pow(p, a),
    "atan2": lambda a, b, i, p: torch.atan2(a, p),
    "bitwise_and": lambda a, b, i, p: i & 3,
    "compare_tensor": lambda a, b, i, p: a > p,
    "compare_number": lambda a, b, i, p: i == 2,
    "compare_mixed_dtypes": lambda a, b, i, p: i <= a,
    "neg": lambda a, b, i, p: -i,
    "exp_of_ints": lambda a, b, i, p: torch.exp(i),
    "sqrt_negative": lambda a, b, i, p: torch.sqrt(a),
    "sigmoid": lambda a, b, i, p: torch.sigmoid(a),
    "gelu_tanh": lambda a, b, i, p: F.gelu(a, approximate="tanh"),
    "silu": lambda a, b, i, p: F.silu(a),
    "clamp_one_sided": lambda a, b, i, p: torch.clamp(a, min=-0.5),
    "clamp_ints": lambda a, b, i, p: torch.clamp(i, -2, 2),
    "addcmul": lambda a, b, i, p: torch.addcmul(a, a, p, value=0.5),
    "addcdiv": lambda a, b, i, p: torch.addcdiv(a, a, p, value=2),
    "lerp": lambda a, b, i, p: torch.lerp(a, p, 0.3),
    "lerp_tensor_weight": lambda a, b, i, p: torch.lerp(a, p, p / 10),
    "sum_all": lambda a, b, i, p: a.sum(),
    "sum_ints_promotes": lambda a, b, i, p: i.sum(dim=1),
    "sum_keepdim_dtype": lambda a, b, i, p: a.sum(dim=0, keepdim=True, dtype=torch.float64),
    "mean_dims": lambda a, b, i, p: a.mean(dim=(0, 1)),
    "mm": lambda a, b, i, p: a @ p.t(),
    "bmm": lambda a, b, i, p: torch.bmm(a.expand(3, 4, 5), p.t().expand(3, 5, 4)),
    "addmm": lambda a, b, i, p: torch.addmm(b[0], p.t(), a, beta=0.5, alpha=2),
    "baddbmm": lambda a, b, i, p: torch.baddbmm(a.unsqueeze(0), a.unsqueeze(0), p.t().unsqueeze(0) @ a.unsqueeze(0)),
    "softmax": lambda a, b, i, p: torch.softmax(a, dim=1),
    "log_softmax_transposed": lambda a, b, i, p: torch.log_softmax(a.t(), dim=0),
    "threshold_backward": lambda a, b, i, p: torch.ops.aten.threshold_backward(p, a, 0.0),
    "channels_last": lambda a, b, i, p: CHANNELS_LAST.to(a.device) * 2,
    "channels_last_sum": lambda a, b, i, p: CHANNELS_LAST.to(a.device).sum(dim=1),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_functional_ops_match_cpu_and_take_the_fast_path(name):
    fn = FUNCTIONAL[name]
    expected = fn(F32, ROW.unsqueeze(0), INTS, POS)
    inputs = [F32.npu(), ROW.unsqueeze(0).npu(), INTS.npu(), POS.npu()]
    torch.npu.synchronize()
    before = fast_path_count()
    actual = fn(*inputs)
    assert fast_path_count() > before
    same_as_cpu(actual, expected)


def test_scalar_overloads_and_tensor_methods():
    x = F32.npu()
    same_as_cpu(torch.ops.aten.add.Scalar(x, 2), torch.ops.aten.add.Scalar(F32, 2))
    same_as_cpu(torch.ops.aten.mul.Scalar(x, 3), torch.ops.aten.mul.Scalar(F32, 3))
    same_as_cpu(x.div(2.0), F32.div(2.0))
    same_as_cpu(torch.ops.aten.eq.Scalar(x, 0.0), torch.ops.aten.eq.Scalar(F32, 0.0))


def test_in_place_forms_write_device_memory():
    cpu = F32.clone()
    dev = F32.npu()
    for op in (lambda t: t.add_(ROW.to(t.device)), lambda t: t.mul_(2), lambda t: t.sub_(1, alpha=3),
               lambda t: t.div_(2, rounding_mode="floor"), lambda t: t.clamp_(max=1.0), lambda t: t.sigmoid_(),
               lambda t: t.lerp_(torch.ones_like(t), 0.5), lambda t: t.lt_(0.7)):
        result = op(dev)
        assert result is dev
        op(cpu)
    same_as_cpu(dev, cpu)
    view = dev.view(-1)[::3]
    view.add_(100)
    cpu.view(-1)[::3].add_(100)
    same_as_cpu(dev, cpu)


def test_in_place_errors_are_raised_at_the_call_as_on_cpu():
    ints = INTS.npu()
    with pytest.raises(RuntimeError, match="can't be cast"):
        ints.add_(1.5)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        ROW.npu().add_(F32.npu())
    with pytest.raises(RuntimeError, match="must match the size"):
        _ = F32.npu() + torch.randn(3).npu()
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors"):
        _ = (F32.npu() > 0) - (F32.npu() > 1)
    assert torch.equal(ints.cpu(), INTS)  # nothing was queued


def test_out_forms_resize_and_cast_like_cpu():
    out = torch.empty(0, device="npu")
    expected = torch.empty(0)
    torch.add(F32.npu(), ROW.npu(), out=out)
    torch.add(F32, ROW, out=expected)
    same_as_cpu(out, expected)
    # A float out= for integer inputs: computed in int64, stored as float.
    out = torch.empty(4, 5, device="npu")
    torch.mul(INTS.npu(), 3, out=out)
    same_as_cpu(out, torch.mul(INTS, 3).float())
    # A non-contiguous out= keeps its strides.
    base = torch.zeros(5, 4, device="npu")
    torch.sub(F32.npu(), 1, out=base.t())
    same_as_cpu(base, (F32 - 1).t().contiguous())
    # Channels-last inputs resize an empty out= to channels-last strides.
    out = torch.empty(0, device="npu")
    expected = torch.empty(0)
    torch.exp(CHANNELS_LAST.npu(), out=out)
    torch.exp(CHANNELS_LAST, out=expected)
    same_as_cpu(out, expected)
    out = torch.empty(0, device="npu")
    torch.sum(F32.npu(), dim=1, out=out)
    same_as_cpu(out, F32.sum(dim=1))
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.add(F32.npu(), 1, out=torch.empty(4, 5, dtype=torch.int64, device="npu"))


def test_arguments_the_fast_path_does_not_take_go_to_the_generic_executor():
    z = torch.randn(3, dtype=torch.complex64, generator=G)
    before = torch_npu.ops.execution_counters()
    result = z.npu().conj() * 2  # conjugate bit: resolved before the kernel or generic
    torch.testing.assert_close(result.cpu(), z.conj() * 2)
    assert torch_npu.ops.execution_counters()["device_async"] > before["device_async"]
    # A 2-d host tensor is not a scalar: an error, as on CUDA.
    before = fast_path_count()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        F32.npu() + F32
    assert fast_path_count() == before


def _verify_signatures(x):
    # The first call of each signature waits for its kernel (Note [Errors at
    # the call], csrc/CallVerification.h); the later ones are what a
    # training step's ops are.
    (x + 1).mul(3).mul_(2)
    x.neg()


def test_fast_path_is_asynchronous_and_ordered_on_the_current_stream():
    x = torch.ones(1024).npu()
    _verify_signatures(x)
    torch.npu.synchronize()
    torch.npu._sleep(300 * torch.npu._cycles_per_ms())
    y = x + 1
    z = y * 3
    z.mul_(2)
    assert not torch.npu.current_stream().query()
    assert torch.equal(z.cpu(), torch.full((1024,), 12.0))

    side = torch.npu.Stream()
    with torch.npu.stream(side):
        torch.npu._sleep(300 * torch.npu._cycles_per_ms())
        w = x.neg()
    assert not side.query()
    assert torch.npu.current_stream().query()
    side.synchronize()
    assert torch.equal(w.cpu(), -torch.ones(1024))


def test_counters_count_the_fast_path_as_asynchronous():
    x = F32.npu()
    torch_npu.ops.reset_execution_counters()
    _ = x + 1
    _ = x.sum(dim=0)
    counters = torch_npu.ops.execution_counters()
    assert counters == {"device_async": 2, "device_sync": 0, "fast_path": 2, "results_copied": 0, "results_placed": 0,
                        "replay_kernels": 0, "replay_aliases": 0, "replay_kernels_dropped": 0}


def test_counters_include_ops_of_other_threads_running_and_exited():
    # Each thread counts fast-path ops in a slot of its own.
    import threading

    a = torch.ones(4, device="npu")
    torch_npu.ops.reset_execution_counters()
    started, finish = threading.Event(), threading.Event()

    def ops(n, wait):
        for _ in range(n):
            a + a
        started.set()
        if wait:
            finish.wait(10)

    running = threading.Thread(target=ops, args=(3, True))
    running.start()
    started.wait(10)
    exited = threading.Thread(target=ops, args=(5, False))
    exited.start()
    exited.join()
    a * 2
    assert torch_npu.ops.execution_counters()["fast_path"] == 9
    finish.set()
    running.join()
    assert torch_npu.ops.execution_counters()["fast_path"] == 9
    torch_npu.ops.reset_execution_counters()
    assert torch_npu.ops.execution_counters()["fast_path"] == 0
    torch.npu.synchronize()


def test_the_first_call_of_a_signature_raises_the_cpu_error_at_the_call():
    ints = torch.tensor([4, 5], dtype=torch.int16).npu()
    with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
        torch.remainder(ints, torch.zeros_like(ints))
    assert (ints + 1).cpu().tolist() == [5, 6]


def test_device_work_errors_name_the_op_at_the_next_sync():
    ints = torch.tensor([4, 5]).npu()
    zeros = torch.zeros(2, dtype=torch.int64).npu()
    torch.div(ints, ints, rounding_mode="floor")  # verifies the signature
    _ = torch.div(ints, zeros, rounding_mode="floor")  # integer division by zero: a kernel error
    with pytest.raises(RuntimeError, match="aten::div") as info:
        torch.npu.synchronize()
    assert "ZeroDivisionError" in str(info.value)
    assert (ints + 1).cpu().tolist() == [5, 6]


def test_launch_blocking_raises_every_calls_errors_at_the_call(python_subprocess_env):
    # Signatures already verified, so only ASCEND_LAUNCH_BLOCKING makes these
    # wait: the CPU kernel's own exception, raised from the calling line.
    code = r"""
        import traceback, torch, torch_npu
        ints = torch.tensor([4, 5]).npu()
        x = torch.arange(4.0).npu()
        torch.div(ints, ints, rounding_mode="floor"), x.index_select(0, torch.tensor([1]).npu())
        for launch in (lambda: torch.div(ints, torch.zeros_like(ints), rounding_mode="floor"),  # line 6
                       lambda: x.index_select(0, torch.tensor([7]).npu())):  # line 7: generic executor
            try:
                launch()
                print("no error at the call")
            except (RuntimeError, IndexError) as error:
                print(type(error).__name__, str(error), traceback.extract_tb(error.__traceback__)[1].lineno)
    """
    result = python_subprocess_env(code, {"ASCEND_LAUNCH_BLOCKING": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["RuntimeError ZeroDivisionError 6", "IndexError index out of range in self 7"]


def test_asynchronous_errors_name_the_python_line():
    ints = torch.tensor([4, 5]).npu()
    torch.div(ints, ints, rounding_mode="floor")  # verifies the signature
    _ = torch.div(ints, torch.zeros_like(ints), rounding_mode="floor")
    line = inspect.currentframe().f_lineno - 1
    with pytest.raises(RuntimeError, match=rf"aten::div.*launched from .*test_fast_path\.py:{line}\)"):
        torch.npu.synchronize()


def test_autograd_through_fast_path_kernels_matches_cpu():
    a = F32.clone().requires_grad_()
    b = POS.clone().requires_grad_()
    an = F32.npu().requires_grad_()
    bn = POS.npu().requires_grad_()
    for x, y in ((a, b), (an, bn)):
        (torch.sigmoid(x * y + 1) / y).sum().backward()
    torch.testing.assert_close(an.grad.cpu(), a.grad)
    torch.testing.assert_close(bn.grad.cpu(), b.grad)


@pytest.mark.skipif(torch.npu.device_count() < 2, reason="needs two devices")
def test_fast_path_runs_on_the_tensors_device():
    x = F32.to("npu:1")
    assert torch.npu.current_device() == 0
    y = x * 2 + 1
    assert y.device == torch.device("npu:1")
    assert torch.npu.current_device() == 0
    same_as_cpu(y, F32 * 2 + 1)


# Layer norm: dedicated kernels that write straight into device memory.
@pytest.mark.parametrize(
    "dtype,param_dtype",
    [(torch.float32, torch.float32), (torch.float64, torch.float64), (torch.bfloat16, torch.bfloat16),
     (torch.bfloat16, torch.float32), (torch.float16, torch.float16), (torch.float32, None)],
    ids=str,
)
def test_layer_norm_matches_cpu_asynchronously(dtype, param_dtype):
    x = torch.randn(6, 5, 8, generator=G).to(dtype).requires_grad_()
    w = torch.randn(5, 8, generator=G).to(param_dtype).requires_grad_() if param_dtype else None
    b = torch.randn(5, 8, generator=G).to(param_dtype).requires_grad_() if param_dtype else None
    to_npu = lambda t: t.detach().npu().requires_grad_() if t is not None else None  # noqa: E731
    xn, wn, bn = to_npu(x), to_npu(w), to_npu(b)
    torch_npu.ops.reset_execution_counters()
    expected = torch.native_layer_norm(x, (5, 8), w, b, 1e-5)
    actual = torch.native_layer_norm(xn, (5, 8), wn, bn, 1e-5)
    grad = torch.randn(6, 5, 8, generator=G).to(dtype)
    expected[0].backward(grad)
    actual[0].backward(grad.npu())
    assert torch_npu.ops.synchronous_ops() == {}
    assert torch_npu.ops.execution_counters()["fast_path"] >= 2
    tolerance = {"atol": 1e-2, "rtol": 1e-2} if dtype in (torch.bfloat16, torch.float16) else {}
    for e, a in zip(expected, actual):
        assert (a.dtype, a.shape, a.stride()) == (e.dtype, e.shape, e.stride())
        torch.testing.assert_close(a.cpu(), e, **tolerance)
    for t, tn in ((x, xn), (w, wn), (b, bn)):
        if t is not None:
            torch.testing.assert_close(tn.grad.cpu(), t.grad, **tolerance)


def test_layer_norm_in_evaluation_and_on_non_contiguous_input():
    x = torch.randn(4, 8, 6, generator=G).transpose(1, 2)  # normalized dims not contiguous
    w, b = torch.randn(8, generator=G), torch.randn(8, generator=G)
    with torch.no_grad():
        torch_npu.ops.reset_execution_counters()
        actual = F.layer_norm(x.npu(), (8,), w.npu(), b.npu())
        assert torch_npu.ops.synchronous_ops() == {}
    same_as_cpu(actual, F.layer_norm(x, (8,), w, b))
    with pytest.raises(RuntimeError, match="Given normalized_shape"):
        F.layer_norm(x.npu(), (5,))
    empty = torch.randn(0, 8)
    same_as_cpu(F.layer_norm(empty.npu(), (8,), w.npu(), b.npu()), F.layer_norm(empty, (8,), w, b))


# Batch norm: a dedicated kernel, so evaluation and reduced precision no
# longer wait for the device.
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize(
    "dtype,param_dtype,channels_last",
    [(torch.float32, torch.float32, False), (torch.float32, torch.float32, True),
     (torch.bfloat16, torch.bfloat16, False), (torch.bfloat16, torch.float32, True),
     (torch.float64, torch.float64, False)],
    ids=str,
)
def test_batch_norm_matches_cpu_asynchronously(train, dtype, param_dtype, channels_last):
    cpu = torch.nn.BatchNorm2d(4).train(train).to(param_dtype)
    with torch.no_grad():
        cpu.running_mean.uniform_(-1, 1)
        cpu.running_var.uniform_(0.5, 2)
        cpu.weight.uniform_(0.5, 2)
    dev = torch.nn.BatchNorm2d(4).train(train).to(param_dtype)
    dev.load_state_dict(cpu.state_dict())
    dev = dev.npu()
    x = torch.randn(3, 4, 5, 6, generator=G).to(dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    x_cpu = x.clone().requires_grad_()
    x_dev = x.npu().requires_grad_()
    torch_npu.ops.reset_execution_counters()
    expected = torch.native_batch_norm(x_cpu, cpu.weight, cpu.bias, cpu.running_mean, cpu.running_var, train, 0.1, 1e-5)
    actual = torch.native_batch_norm(x_dev, dev.weight, dev.bias, dev.running_mean, dev.running_var, train, 0.1, 1e-5)
    assert torch_npu.ops.synchronous_ops() == {}
    tolerance = {"atol": 1e-2, "rtol": 1e-2} if dtype == torch.bfloat16 else {}
    for e, a in zip(expected, actual):
        assert (a.dtype, a.shape, a.stride()) == (e.dtype, e.shape, e.stride())
        torch.testing.assert_close(a.cpu(), e, **tolerance)
    torch.testing.assert_close(dev.running_mean.cpu(), cpu.running_mean)
    torch.testing.assert_close(dev.running_var.cpu(), cpu.running_var)
    cpu(x_cpu).float().sum().backward()
    dev(x_dev).float().sum().backward()
    torch.testing.assert_close(x_dev.grad.cpu(), x_cpu.grad, **tolerance)


def test_batch_norm_argument_errors_are_raised_at_the_call():
    x = torch.randn(2, 3, 4).npu()
    with pytest.raises(ValueError, match="running_mean must be defined in evaluation mode"):
        torch.native_batch_norm(x, None, None, None, None, False, 0.1, 1e-5)
