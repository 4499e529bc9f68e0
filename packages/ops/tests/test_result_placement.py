"""Result placement: a large result of an op without an out= kernel is
computed in its npu output instead of being copied there, from the second
run of a signature on; a kernel that does not allocate as it did before is
still correct; one that keeps memory lent to it is reported."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import torch_npu
import torch_npu.ops

MIB_OF_FLOATS = 1 << 18


def deliveries() -> tuple[int, int]:
    counters = torch_npu.ops.execution_counters()
    return counters["results_copied"], counters["results_placed"]


def test_conv2d_learns_then_computes_in_the_npu_output():
    x = torch.randn(3, 5, 67, 71)
    w = torch.randn(32, 5, 3, 3)  # a 1.8 MB result
    b = torch.randn(32)
    expected = F.conv2d(x, w, b, padding=1)
    xn, wn, bn = x.npu(), w.npu(), b.npu()
    torch_npu.ops.reset_execution_counters()
    for _ in range(3):
        actual = F.conv2d(xn, wn, bn, padding=1)
        assert actual.stride() == expected.stride()
        torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)
    # The first run learns which allocation becomes the result.
    assert deliveries() == (1, 2)


def test_conv2d_backward_results_are_right_when_placed():
    x = torch.randn(2, 16, 97, 89, requires_grad=True)  # 1.1 MB
    w = torch.randn(24, 16, 3, 3, requires_grad=True)  # a 1.7 MB result
    F.conv2d(x, w, padding=1).square().sum().backward()
    xn = x.detach().npu().requires_grad_()
    wn = w.detach().npu().requires_grad_()
    torch_npu.ops.reset_execution_counters()
    for _ in range(3):
        xn.grad = wn.grad = None
        F.conv2d(xn, wn, padding=1).square().sum().backward()
        torch.testing.assert_close(xn.grad.cpu(), x.grad)
        torch.testing.assert_close(wn.grad.cpu(), w.grad)
    _, placed = deliveries()
    assert placed >= 4  # forward output and input gradient, in runs 2 and 3


def test_small_results_are_copied(python_subprocess_env):
    # In a process of its own: the threshold is read once, and this test is
    # about its default (1 MiB).
    code = """
        import torch, torch_npu, torch.nn.functional as F
        x, w = torch.randn(1, 2, 9, 9), torch.randn(3, 2, 3, 3)
        for _ in range(3):
            torch.testing.assert_close(F.conv2d(x.npu(), w.npu()).cpu(), F.conv2d(x, w))
        counters = torch_npu.ops.execution_counters()
        print(counters["results_copied"], counters["results_placed"])
    """
    result = python_subprocess_env(code, {"TORCH_NPU_OPS_RESULT_PLACEMENT_MIN_BYTES": ""})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3", "0"]


# A CPU kernel whose allocations the test controls: it makes two buffers of
# the result's size and returns the one `choice` names.
choice = {"index": 1}


@torch.library.custom_op("npu_placement_test::pick", mutates_args=(), device_types="cpu")
def pick(x: torch.Tensor) -> torch.Tensor:
    first = torch.empty_like(x)
    second = torch.empty_like(x)
    torch.mul(x, 2, out=first)
    torch.mul(x, 3, out=second)
    return (first, second)[choice["index"]]


@pick.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def run_pick(x: torch.Tensor, index: int) -> torch.Tensor:
    choice["index"] = index
    out = pick(x)
    torch.npu.synchronize()
    return out


def test_a_kernel_that_returns_another_allocation_is_still_right():
    x = torch.randn(MIB_OF_FLOATS + 3)
    xn = x.npu()
    torch_npu.ops.reset_execution_counters()
    torch.testing.assert_close(run_pick(xn, 1).cpu(), x * 3)  # learns: the second allocation
    torch.testing.assert_close(run_pick(xn, 1).cpu(), x * 3)  # placed
    assert deliveries() == (1, 1)
    # Now the kernel returns the first allocation while the second is lent
    # the output's memory (and written by the kernel): the result is copied,
    # and this signature is no longer placed.
    torch.testing.assert_close(run_pick(xn, 0).cpu(), x * 2)
    torch.testing.assert_close(run_pick(xn, 1).cpu(), x * 3)
    assert deliveries() == (3, 1)


# A CPU kernel that keeps a reference to its result: when the result is
# placed, that reference aliases the npu output.
kept: list[torch.Tensor] = []


@torch.library.custom_op("npu_placement_test::keep", mutates_args=(), device_types="cpu")
def keep(x: torch.Tensor) -> torch.Tensor:
    result = x * 2
    kept.append(result)
    return result


@keep.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def test_a_kernel_that_keeps_lent_memory_is_an_error():
    x = torch.randn(MIB_OF_FLOATS + 5)
    xn = x.npu()
    torch.testing.assert_close(keep(xn).cpu(), x * 2)  # learns
    out = keep(xn)
    try:
        torch.npu.synchronize()
        raise AssertionError("keeping lent memory was not reported")
    except RuntimeError as error:
        message = str(error)
    assert "npu_placement_test::keep still holds memory lent to it from its npu output" in message
    assert "TORCH_NPU_OPS_RESULT_PLACEMENT=0" in message
    del out
    kept.clear()
    # The signature is no longer placed: the kernel may keep what it likes.
    torch_npu.ops.reset_execution_counters()
    torch.testing.assert_close(keep(xn).cpu(), x * 2)
    assert deliveries() == (1, 0)
    kept.clear()


def test_placement_can_be_turned_off(python_subprocess_env):
    code = """
        import torch, torch_npu, torch.nn.functional as F
        x, w = torch.randn(2, 4, 64, 64).npu(), torch.randn(16, 4, 3, 3).npu()
        for _ in range(3):
            F.conv2d(x, w, padding=1)
        torch.npu.synchronize()
        counters = torch_npu.ops.execution_counters()
        print(counters["results_copied"], counters["results_placed"])
    """
    result = python_subprocess_env(code, {"TORCH_NPU_OPS_RESULT_PLACEMENT": "0"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3", "0"]


def test_a_bad_threshold_is_reported(python_subprocess_env):
    code = """
        import torch, torch_npu, torch.nn.functional as F
        x, w = torch.randn(2, 4, 8, 8).npu(), torch.randn(16, 4, 3, 3).npu()
        try:
            F.conv2d(x, w, padding=1)
            torch.npu.synchronize()
        except RuntimeError as error:
            print(error)
    """
    result = python_subprocess_env(code, {"TORCH_NPU_OPS_RESULT_PLACEMENT_MIN_BYTES": "1MB"})
    assert result.returncode == 0, result.stderr
    assert "TORCH_NPU_OPS_RESULT_PLACEMENT_MIN_BYTES must be a number of bytes, got '1MB'" in result.stdout
