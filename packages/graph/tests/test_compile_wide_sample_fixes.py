"""Minimal cases of what a wide run of the OpInfo sample (every eligible op,
float32, first samples, forward and backward) found wrong in torch.compile
on npu, each compiled and compared with eager npu:

- two silent wrong results: a strided pooling window read as consecutive
  elements (Note [Strided accesses are not vectorised]), and a sum of a 0-d
  tensor added once per element of its broadcast (Note [Reductions of a 0-d
  tensor]); in float16, asinh off by 0.1 (Note [Half-precision math in
  float32]);
- groups whose program needs a graph input Inductor's lowering does not
  read (Note [Graph inputs a group needs but does not list]);
- scatters into a view written over the whole base (Note [Writes into a
  view of a buffer]), and an op packet in Inductor's decomposition;
- a process killed by torch-mlir (Note [Programs torch-mlir crashes on]).
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from torch_npu.graph.compile import _mlir, _strided_access

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")


def _compiled_matches_eager(fn, *args: torch.Tensor) -> None:
    expected = fn(*args)
    with warnings.catch_warnings():
        # A kernel MLIR cannot build may run its aten ops eagerly: its
        # results still count.
        warnings.simplefilter("ignore")
        actual = torch.compile(fn, dynamic=False)(*args)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def _ramp(*shape: int) -> torch.Tensor:
    # Distinct values, so that reading the wrong element shows.
    return torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape).to("npu")


@needs_mlir
@pytest.mark.parametrize("case", ["avg_pool1d", "avg_pool2d_stride_2", "max_pool1d_stride_3", "slice_step_2"])
def test_strided_reads_are_not_vectorised(case):
    # avg_pool1d(x, 3) gave [1, 2, 3] for eager's [1, 4, 7]: the window
    # 3 * i + k was read as 16 consecutive elements from 3 * i + k.
    fns = {
        "avg_pool1d": (lambda x: F.avg_pool1d(x, 3), _ramp(2, 3, 48)),
        "avg_pool2d_stride_2": (lambda x: F.avg_pool2d(x, 2), _ramp(1, 2, 8, 40)),
        "max_pool1d_stride_3": (lambda x: F.max_pool1d(x * 2.0, 3), _ramp(2, 2, 51)),
        "slice_step_2": (lambda x: (x[:, ::2] + 1.0).sum(-1), _ramp(4, 64)),
    }
    fn, x = fns[case]
    _compiled_matches_eager(fn, x)


_POOL_LOOPS = """#map = affine_map<(d0, d1) -> (d0 + d1)>
#map1 = affine_map<(d0, d1) -> (d0 * 3 + d1)>
module {
  func.func @kernel(%arg0: memref<9xf32>, %arg1: memref<3xf32>) {
    affine.for %arg2 = 0 to 3 {
      affine.for %arg3 = 0 to 3 {
        %0 = affine.apply #map(%arg2, %arg3)
        %1 = affine.apply #map1(%arg2, %arg3)
        %2 = affine.load %arg0[%1] : memref<9xf32>
        %3 = affine.load %arg0[%0] : memref<9xf32>
        %4 = arith.addf %2, %3 : f32
        affine.store %4, %arg1[%arg2] : memref<3xf32>
      }
    }
    return
  }
}
"""


def test_strided_access_rewrite_keeps_unit_steps_affine():
    rewritten = _strided_access.strided_accesses_scalar(_POOL_LOOPS)
    # The access through 3 * i + k becomes scalar; i + k and i stay affine.
    assert "%2 = memref.load %arg0[%1] : memref<9xf32>" in rewritten
    assert "%3 = affine.load %arg0[%0] : memref<9xf32>" in rewritten
    assert "affine.store %4, %arg1[%arg2] : memref<3xf32>" in rewritten
    unit_only = _POOL_LOOPS.replace("d0 * 3 + d1", "d0 + d1 + 1")
    assert _strided_access.strided_accesses_scalar(unit_only) is unit_only


def test_strided_access_rewrite_refuses_scaled_inline_index():
    text = _POOL_LOOPS.replace("affine.load %arg0[%1]", "affine.load %arg0[%arg2 * 3]")
    with pytest.raises(_strided_access.StridedAccessError, match="scaled index"):
        _strided_access.strided_accesses_scalar(text)


@needs_mlir
@pytest.mark.parametrize("case", ["argmax_0d", "argmin_0d", "slice_scatter"])
def test_graph_input_the_lowering_does_not_read(case):
    # Inductor lowers argmax of a 0-d tensor to the constant 0 and reads no
    # input; the group's program is argmax(x), which needs x.
    fns = {
        "argmax_0d": (lambda x: torch.argmax(x), torch.tensor(3.0, device="npu")),
        "argmin_0d": (lambda x: torch.argmin(x, keepdim=True, dim=0), torch.tensor(3.0, device="npu")),
        "slice_scatter": (lambda x: torch.slice_scatter(x, x[2:4] * 2.0, start=2, end=4), _ramp(6, 5)),
    }
    fn, x = fns[case]
    _compiled_matches_eager(fn, x)


@needs_mlir
@pytest.mark.parametrize("case", ["diagonal_scatter", "as_strided_scatter", "diagonal_backward",
                                  "as_strided_backward"])
def test_scatter_into_a_view_writes_only_the_view(case):
    # The kernel that writes the diagonal was given the whole (10, 10) base
    # as its output, for a (10,) value.
    def diagonal_backward(x):
        x = x.detach().requires_grad_()
        (torch.diagonal(x) * torch.arange(1.0, 11.0, device="npu")).sum().backward()
        return x.grad

    def as_strided_backward(x):
        x = x.detach().requires_grad_()
        (torch.as_strided(x, (3, 3), (1, 2), 1) ** 2).sum().backward()
        return x.grad

    fns = {
        "diagonal_scatter": (lambda x, y: torch.diagonal_scatter(x, y), _ramp(10, 10), -_ramp(10)),
        "as_strided_scatter": (lambda x, y: torch.as_strided_scatter(x, y, (3, 3), (1, 2), 1),
                               _ramp(25), -_ramp(3, 3)),
        "diagonal_backward": (diagonal_backward, _ramp(10, 10)),
        "as_strided_backward": (as_strided_backward, _ramp(25)),
    }
    fn, *args = fns[case]
    _compiled_matches_eager(fn, *args)


@needs_mlir
@pytest.mark.parametrize("case", ["sum_expand", "bool_count_divides", "amax_broadcast", "cross_entropy_backward"])
def test_reduction_of_a_0d_tensor_is_its_value(case):
    # x.sum().expand(4) of 1.0 gave [1, 2, 3, 4]: the loop-less reduction
    # was fused into the broadcast's loop.
    def cross_entropy_backward(x, w):
        x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
        loss = F.cross_entropy(F.linear(x, w), torch.tensor(2, device="npu"))
        return torch.autograd.grad(loss, (x, w))

    fns = {
        "sum_expand": (lambda x: x.sum().expand(4) * 1.0, torch.tensor(1.5, device="npu")),
        "bool_count_divides": (lambda x: (x / (x > 0).sum()).expand(3, 5) * 2.0, torch.tensor(4.0, device="npu")),
        "amax_broadcast": (lambda x: x.amax().expand(8) + torch.arange(8.0, device="npu"),
                           torch.tensor(-2.0, device="npu")),
        "cross_entropy_backward": (cross_entropy_backward, _ramp(3) / 3.0, _ramp(4, 3).sin()),
    }
    fn, *args = fns[case]
    _compiled_matches_eager(fn, *args)


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_asinh_is_computed_in_float32(dtype):
    # Compiled float16 asinh was off by 0.1 near 3.0 (MLIR's expansion in
    # float16); eager computes in float32 and rounds once.
    x = torch.linspace(-10.0, 10.0, 400, device="npu").to(dtype)
    expected = torch.asinh(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual = torch.compile(torch.asinh, dynamic=False)(x)
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)


@needs_mlir
@pytest.mark.parametrize("return_indices", [False, True])
def test_integer_max_pool3d_never_reaches_torch_mlir(return_indices):
    # torch-mlir's lowering crashed the process (SIGSEGV) on it. Its kernel
    # runs eagerly with a warning (Note [Programs torch-mlir crashes on]),
    # unless Inductor's lowering made it an extern kernel, the aten op
    # (Note [Lowerings that are not aten programs run as extern kernels]),
    # as it does with the indices, or the npu post-grad pass did (Note [Max
    # pooling of npu graphs]: npu_inductor's twin of the aten op).
    from torch._inductor.utils import run_and_get_code

    from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

    torch._dynamo.reset()
    x = torch.randint(-9, 9, (1, 2, 3, 6, 5), device="npu")

    def fn(x):
        return F.max_pool3d(x, 3, 2, ceil_mode=True, return_indices=return_indices)

    # Compiled afresh: the wrapper's code is what the test reads.
    with warnings.catch_warnings(record=True) as caught, torch._inductor.config.patch(force_disable_caches=True):
        warnings.simplefilter("always")
        actual, codes = run_and_get_code(torch.compile(fn, dynamic=False), x)
    torch.testing.assert_close(actual, fn(x))
    warned = any(issubclass(w.category, NPUKernelFallbackWarning) and "crashes lowering max_pool3d" in str(w.message)
                 for w in caught)
    extern = any(".max_pool3d" in line and "MLIRKernel(" not in line for code in codes for line in code.splitlines()
                 if "torch.ops.aten." in line or "torch.ops.npu_inductor." in line)
    assert warned or extern, codes


@needs_mlir
@pytest.mark.parametrize("case", ["elu_celu", "exp_times_one"])
def test_results_that_fold_into_one_are_copies(case):
    # Both results fold into one value, which the kernel returned twice:
    # MLIR's buffer-results-to-out-params crashed the process (SIGSEGV) on
    # it (Note [Results that fold into one]).
    from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

    fns = {
        "elu_celu": lambda x: (F.elu(x), F.celu(x)),
        "exp_times_one": lambda x: (torch.exp(x), torch.exp(x) * 1.0),
    }
    fn = fns[case]
    x = torch.linspace(-10, 10, 64, device="npu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", NPUKernelFallbackWarning)  # a compiled kernel, not the fallback
        actual = torch.compile(fn, dynamic=False)(x)
    torch.testing.assert_close(actual, fn(x))
    assert actual[0].data_ptr() != actual[1].data_ptr()
