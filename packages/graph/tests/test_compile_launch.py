"""The launch fast path of MLIR kernels (Note [Armed launchers of MLIR
kernels], csrc/compile/KernelLaunch.cpp): a kernel's calls that match the
variant it last ran are launched by its armed Launcher, any other call takes
the general path, and both give the kernel's results."""

from __future__ import annotations

import warnings

import pytest
import torch

from torch_npu.graph.compile import _mlir
from torch_npu.graph.compile.kernel import MLIRKernel

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")

_MUL_ADD = (
    "def program(in0, in1, _device):\n"
    "    v0 = torch.ops.aten.mul.Tensor(in0, in1)\n"
    "    v1 = torch.ops.aten.add.Tensor(v0, 1.0)\n"
    "    return (v1,)\n"
)

# A program with a size symbol: the sum of the first s0 rows.
_ROWS_SUM = (
    "def program(in0, s0, _device):\n"
    "    v0 = torch.ops.aten.slice.Tensor(in0, 0, 0, s0)\n"
    "    v1 = torch.ops.aten.sum.dim_IntList(v0, [0])\n"
    "    return (v1,)\n"
)


def _mul_add() -> MLIRKernel:
    return MLIRKernel("mlir_fused_test_mul_add_0", _MUL_ADD, 2, 1, 0)


def _inputs(*shape: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(*shape, device="npu"), torch.randn(*shape, device="npu")


@needs_mlir
def test_repeated_calls_launch_armed_with_new_addresses():
    kernel = _mul_add()
    assert kernel._launcher is None
    a, b = _inputs(16, 32)
    out = torch.empty_like(a)
    kernel.run(a, b, out)
    assert kernel._launcher.armed
    # The armed launch takes each call's tensors, not the arming call's.
    for _ in range(3):
        a, b = _inputs(16, 32)
        out = torch.full_like(a, float("nan"))
        assert kernel._launcher.launch((a, b, out), None)
        torch.testing.assert_close(out, a * b + 1.0)


@needs_mlir
def test_calls_of_another_geometry_take_the_general_path():
    kernel = _mul_add()
    a, b = _inputs(16, 32)
    kernel.run(a, b, torch.empty_like(a))
    c, d = _inputs(8, 32)
    out = torch.empty_like(c)
    # Another shape, dtype or layout than the armed variant's: not launched.
    assert not kernel._launcher.launch((c, d, out), None)
    assert not kernel._launcher.launch((a.double(), b.double(), torch.empty_like(a.double())), None)
    wide = torch.empty(16, 64, device="npu")[:, :32]
    assert not kernel._launcher.launch((a, b, wide), None)
    assert not kernel._launcher.launch((a, b), None)
    # run() compiles and launches that variant, and arms the launcher with it.
    kernel.run(c, d, out)
    torch.testing.assert_close(out, c * d + 1.0)
    assert kernel._launcher.launch((c, d, out), None)
    assert not kernel._launcher.launch((a, b, torch.empty_like(a)), None)


@needs_mlir
def test_non_contiguous_output_disarms_and_is_written():
    kernel = _mul_add()
    a, b = _inputs(16, 32)
    kernel.run(a, b, torch.empty_like(a))
    # A transposed output is computed into a contiguous buffer and copied
    # (the general path); the launcher cannot launch such a call as it is.
    out = torch.empty(32, 16, device="npu").t()
    kernel.run(a, b, out)
    torch.testing.assert_close(out, a * b + 1.0)
    assert not kernel._launcher.armed
    out2 = torch.empty_like(a)
    kernel.run(a, b, out2)
    assert kernel._launcher.armed
    torch.testing.assert_close(out2, a * b + 1.0)


@needs_mlir
def test_size_symbols_must_match():
    kernel = MLIRKernel("mlir_fused_test_rows_sum_0", _ROWS_SUM, 1, 1, 1)
    x = torch.randn(16, 8, device="npu")
    out = torch.empty(8, device="npu")
    kernel.run(x, out, 4)
    torch.testing.assert_close(out, x[:4].sum(0))
    assert kernel._launcher.launch((x, out, 4), None)
    assert not kernel._launcher.launch((x, out, 6), None)
    kernel.run(x, out, 6)
    torch.testing.assert_close(out, x[:6].sum(0))


@needs_mlir
def test_stream_given_or_current():
    kernel = _mul_add()
    a, b = _inputs(64, 64)
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    # Wrapper code of earlier versions names the stream; with none given,
    # the kernel runs on the current stream (Note [npu kernels find their
    # stream]). Either way, first call (general path) and later (armed).
    for _ in range(2):
        named, current = torch.empty_like(a), torch.empty_like(a)
        kernel.run(a, b, named, stream=side.stream_id)
        with torch.npu.stream(side):
            kernel.run(a, b, current)
        torch.npu.current_stream().wait_stream(side)
        torch.testing.assert_close(named, a * b + 1.0)
        torch.testing.assert_close(current, a * b + 1.0)


@needs_mlir
def test_bool_tensors_launch_armed():
    program = (
        "def program(in0, in1, _device):\n"
        "    v0 = torch.ops.aten.gt.Scalar(in0, 0.0)\n"
        "    v1 = torch.ops.aten.logical_and.default(v0, in1)\n"
        "    return (v1,)\n"
    )
    kernel = MLIRKernel("mlir_fused_test_gt_and_0", program, 2, 1, 0)
    for _ in range(3):
        x, mask = torch.randn(64, device="npu"), torch.randn(64, device="npu") > 0
        out = torch.empty(64, dtype=torch.bool, device="npu")
        kernel.run(x, mask, out)
        assert torch.equal(out, (x > 0) & mask)
    assert kernel._launcher.armed


@needs_mlir
def test_split_kernel_launches_armed_in_blocks():
    from torch_npu.graph import compile as npu_compile
    from torch_npu.graph.compile import _launch
    from torch_npu.graph.compile.kernel import SplitKernel

    if not _launch.RUNS_BLOCKS_IN_PARALLEL:
        pytest.skip("the launcher runs blocks in turn, so kernels are not split")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        # The rows of a row-wise program over 257 rows: blocks of two sizes.
        program = (
            "def program(in0, _device):\n"
            "    v0 = torch.ops.aten.exp.default(in0)\n"
            "    v1 = torch.ops.aten.sum.dim_IntList(v0, [1], True)\n"
            "    v2 = torch.ops.aten.div.Tensor(v0, v1)\n"
            "    return (v2,)\n"
        )
        kernel = MLIRKernel("mlir_fused_test_softmax_0", program, 1, 1, 0)
        x = torch.randn(257, 163, device="npu")
        out = torch.empty_like(x)
        kernel.run(x, out)
        assert isinstance(next(iter(kernel._variants.values())), SplitKernel)
        assert kernel._launcher.armed
        before = npu_compile.kernel_stats()["split_launches"]
        for _ in range(3):
            x = torch.randn(257, 163, device="npu")
            out = torch.full_like(x, float("nan"))
            assert kernel._launcher.launch((x, out), None)
            torch.testing.assert_close(out, torch.softmax(x, dim=1), atol=1e-6, rtol=1e-5)
        assert npu_compile.kernel_stats()["split_launches"] - before == 3
        # Another thread count may split differently: the general path.
        torch.set_num_threads(1)
        assert not kernel._launcher.launch((x, out), None)
    finally:
        torch.set_num_threads(threads)


@needs_mlir
def test_kernel_of_many_tensors_runs_compiled_by_both_paths():
    # Kernels are called through MLIR's packed wrapper, whatever their
    # number of tensors: 40 inputs and an output here, past what a fixed-arity
    # call took (32); such groups used to run their aten ops eagerly.
    n = 40
    lines = ["def program(" + ", ".join(f"in{i}" for i in range(n)) + ", _device):",
             "    v0 = torch.ops.aten.mul.Tensor(in0, 1.0)"]
    for i in range(1, n):
        lines.append(f"    v{i} = torch.ops.aten.add.Tensor(v{i - 1}, in{i}, alpha={i + 1})")
    lines.append(f"    return (v{n - 1},)")
    kernel = MLIRKernel("mlir_fused_test_many_inputs_0", "\n".join(lines) + "\n", n, 1, 0)

    def expected(xs: list[torch.Tensor]) -> torch.Tensor:
        return sum(((i + 1) * x.cpu().double() for i, x in enumerate(xs)), torch.zeros(())).float()

    # Float32 rounding of the 40 steps, far below what one input given in
    # another's place would change (about 1 per element).
    tolerance = {"atol": 2e-4, "rtol": 1e-5}

    xs = [torch.randn(8, 24, device="npu") for _ in range(n)]
    out = torch.full_like(xs[0], float("nan"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager fallback, which warns
        kernel.run(*xs, out)
    assert isinstance(next(iter(kernel._variants.values())), _mlir.CompiledKernel)
    torch.testing.assert_close(out.cpu(), expected(xs), **tolerance)
    assert kernel._launcher.armed
    xs = [torch.randn(8, 24, device="npu") for _ in range(n)]
    out = torch.full_like(xs[0], float("nan"))
    assert kernel._launcher.launch((*xs, out), None)
    torch.testing.assert_close(out.cpu(), expected(xs), **tolerance)
