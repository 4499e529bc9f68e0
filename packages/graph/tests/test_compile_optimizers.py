"""torch.compile of optimizer steps on npu, as PyTorch documents it
(``torch.compile(optimizer.step)``): the multi-tensor (foreach) optimizers
compile (Note [Foreach ops one tensor at a time]), read their host step
counts (Note [Host scalars a kernel reads]) and update parameters and states
in place (Note [Kernels that write their own inputs]) exactly as eager npu
does; kernels whose loops read each element before they write it run on the
parameters' own buffers (Note [Outputs written over their own inputs])."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo

from torch_npu.graph.compile import _in_place, _mlir
from torch_npu.graph.compile.kernel import MLIRKernel, NPUKernelFallbackWarning

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")

OPTIMIZERS = {
    "adam": lambda p: torch.optim.Adam(p, lr=1e-2),
    "adamw_amsgrad": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, amsgrad=True),
    "adam_capturable": lambda p: torch.optim.Adam(p, lr=1e-2, capturable=True),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, nesterov=True),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=1e-2, momentum=0.5),
    "nadam": lambda p: torch.optim.NAdam(p, lr=1e-2),
    # _foreach_maximum_(mus, 1.0) (Note [Foreach ops one tensor at a time]);
    # t0=1 so that mu changes from the second step on.
    "asgd": lambda p: torch.optim.ASGD(p, lr=1e-2, t0=1),
}


def _train(make_optimizer, compiled: bool) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)).npu()
    optimizer = make_optimizer(model.parameters())
    step = torch.compile(optimizer.step) if compiled else optimizer.step
    for i in range(3):
        inputs = torch.randn(4, 8, generator=torch.Generator().manual_seed(i)).npu()
        model(inputs).pow(2).sum().backward()
        step()
        optimizer.zero_grad()
    states = [t for state in optimizer.state.values() for t in state.values() if isinstance(t, torch.Tensor)]
    return [p.detach().cpu() for p in model.parameters()] + [t.detach().cpu() for t in states]


@needs_mlir
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_compiled_optimizer_step_matches_eager(name):
    expected = _train(OPTIMIZERS[name], compiled=False)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", NPUKernelFallbackWarning)
        got = _train(OPTIMIZERS[name], compiled=True)
    torch._dynamo.reset()
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


@needs_mlir
def test_a_kernel_that_updates_its_input_in_place_reads_it_first():
    # The clone and the in-place update fuse into one kernel whose output is
    # the input's own buffer; MLIR ran the update's loop first and the clone
    # returned the doubled values.
    def clone_then_double(x: torch.Tensor) -> torch.Tensor:
        before = x.clone()
        x.mul_(2)
        return before

    def nesterov(g: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        buffer = g.clone()
        g.add_(buffer, alpha=0.9)
        p.add_(g, alpha=-0.1)
        return buffer

    for fn, shapes in ((clone_then_double, [(5,)]), (nesterov, [(2, 4), (2, 4)])):
        torch.manual_seed(0)
        inputs = [torch.randn(shape, device="npu") for shape in shapes]
        expected_inputs = [t.clone() for t in inputs]
        expected = fn(*expected_inputs)
        torch._dynamo.reset()
        got = torch.compile(fn)(*inputs)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        for g, e in zip(inputs, expected_inputs):
            torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-6)
    torch._dynamo.reset()


def _kernels_run_on(fn, inputs: list[torch.Tensor]) -> tuple[object, list[MLIRKernel]]:
    """``fn`` compiled and run on ``inputs``, and the npu kernels it ran."""
    created: list[MLIRKernel] = []
    original = MLIRKernel.__init__

    def recording_init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        created.append(self)

    torch._dynamo.reset()
    MLIRKernel.__init__ = recording_init
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", NPUKernelFallbackWarning)
            compiled = torch.compile(fn)
            result = compiled(*inputs)
            result = compiled(*inputs)  # a second call: the armed path where the first armed it
    finally:
        MLIRKernel.__init__ = original
    torch._dynamo.reset()
    return result, created


@needs_mlir
def test_an_elementwise_kernel_updates_its_input_without_staging():
    # Note [Outputs written over their own inputs]: x's loop reads each
    # element before it writes it, so x is written in place, and armed.
    def update(x: torch.Tensor, g: torch.Tensor) -> None:
        x.mul_(0.9).add_(g, alpha=0.5)

    torch.manual_seed(0)
    x, g = torch.randn(64, 33, device="npu"), torch.randn(64, 33, device="npu")
    expected = x.clone()
    update(expected, g)
    update(expected, g)
    _, kernels = _kernels_run_on(update, [x, g])
    assert kernels
    assert all(k.staged_launches == 0 for k in kernels)
    # The first call wrote x in place through the general path and armed
    # the kernel; the second launched it armed.
    assert [k.in_place_launches for k in kernels] == [1]
    assert kernels[0]._launcher is not None and kernels[0]._launcher.armed
    torch.testing.assert_close(x, expected, rtol=1e-6, atol=1e-6)


def _program(*lines: str, inputs: int = 1) -> str:
    params = ", ".join([f"in{i}" for i in range(inputs)] + ["_device"])
    return "\n".join([f"def program({params}):", *(f"    {line}" for line in lines), ""])


# Programs run with their output 0 the buffer of their input 0, as Inductor
# passes an in-place update fused with other reads of the tensor.
_WRITTEN_OVER_THEIR_INPUT = {
    # Each element read only by the iteration that writes it: in place.
    "elementwise": (_program("v0 = torch.ops.aten.mul.Tensor(in0, 0.9)",
                             "v1 = torch.ops.aten.add.Tensor(v0, in1, alpha=0.5)",
                             "return (v1,)", inputs=2), False),
    # A reduction finished in its own loops before the loop that writes.
    "reduced_before": (_program("v0 = torch.ops.aten.sum.dim_IntList(in0, [1], True)",
                                "v1 = torch.ops.aten.sub.Tensor(in0, v0)",
                                "return (v1,)"), False),
    # Reads of other elements than the one written, or after it: staged.
    "transposed": (_program("v0 = torch.ops.aten.t.default(in0)",
                            "v1 = torch.ops.aten.add.Tensor(in0, v0)",
                            "return (v1,)"), True),
    "shifted": (_program("v0 = torch.ops.aten.slice.Tensor(in0, 0, 0, 1)",
                         "v1 = torch.ops.aten.slice.Tensor(in0, 0, 0, -1)",
                         "v2 = torch.ops.aten.mul.Tensor(v1, 2)",
                         "v3 = torch.ops.aten.cat.default([v0, v2])",
                         "return (v3,)"), True),
    "broadcast": (_program("v0 = torch.ops.aten.slice.Tensor(in0, 0, 0, 1)",
                           "v1 = torch.ops.aten.add.Tensor(in0, v0)",
                           "return (v1,)"), True),
    "reduced_after": (_program("v0 = torch.ops.aten.mul.Tensor(in0, 2)",
                               "v1 = torch.ops.aten.sum.dim_IntList(in0, [1], True)",
                               "return (v0, v1)"), True),
    "cloned": (_program("v0 = torch.ops.aten.mul.Tensor(in0, 2)",
                        "v1 = torch.ops.aten.clone.default(in0)",
                        "return (v0, v1)"), True),
}


@needs_mlir
@pytest.mark.parametrize("rows", [8, 512])  # 512 x 8 x 8: split in blocks of rows where threads allow
@pytest.mark.parametrize("case", _WRITTEN_OVER_THEIR_INPUT)
def test_kernel_written_over_its_input_is_staged_unless_its_loops_allow(case, rows):
    source, staged = _WRITTEN_OVER_THEIR_INPUT[case]
    num_inputs = source.split(")", 1)[0].count("in")
    num_outputs = source.rsplit("return (", 1)[1].count("v")
    kernel = MLIRKernel(f"mlir_fused_test_over_input_{case}_0", source, num_inputs, num_outputs, 0)
    torch.manual_seed(0)
    shape = (8, 8) if case == "transposed" else (rows, 8, 8)
    x = torch.randn(shape, device="npu")
    others = [torch.randn(shape, device="npu") for _ in range(num_inputs - 1)]
    expected = kernel.program(x.clone(), *[t.clone() for t in others], x.device)
    extra = [torch.empty_like(e) for e in expected[1:]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", NPUKernelFallbackWarning)
        kernel.run(x, *others, x, *extra)
    torch.testing.assert_close(x, expected[0], rtol=1e-6, atol=1e-6)
    for got, want in zip(extra, expected[1:]):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert (kernel.staged_launches, kernel.in_place_launches) == ((1, 0) if staged else (0, 1))
    assert (kernel._launcher is not None and kernel._launcher.armed) == (not staged)


_ADAM_LOOPS = """module {
  func.func @kernel(%arg0: memref<4x8xf32>, %arg1: memref<4x8xf32>, %arg2: memref<4x8xf32>, %arg3: memref<4x8xf32>, \
%arg4: memref<4x8xf32>) attributes {llvm.emit_c_interface} {
    affine.for %arg5 = 0 to 4 {
      affine.for %arg6 = 0 to 8 {
        %0 = affine.load %arg1[%arg5, %arg6] : memref<4x8xf32>
        %1 = affine.load %arg2[%arg5, %arg6] : memref<4x8xf32>
        %2 = arith.addf %0, %1 : f32
        affine.store %2, %arg4[%arg5, %arg6] : memref<4x8xf32>
      }
    }
    affine.for %arg5 = 0 to 4 {
      affine.for %arg6 = 0 to 8 {
        %0 = affine.load %arg0[%arg5, %arg6] : memref<4x8xf32>
        %1 = affine.load %arg4[%arg5, %arg6] : memref<4x8xf32>
        %2 = arith.subf %0, %1 : f32
        affine.store %2, %arg3[%arg5, %arg6] : memref<4x8xf32>
      }
    }
    return
  }
}
"""


def test_in_place_pairs_of_loops():
    # (p, m, g) -> (p_new, m_new): m_new's loop reads m's element before it
    # writes it, and p is read only in the loop that writes p_new; g may be
    # written by either loop's output only where it is not read after it.
    pairs = _in_place.in_place_pairs(_ADAM_LOOPS, 3, 2)
    assert (0, 0) in pairs and (1, 1) in pairs
    # m is read by the first loop, before the second writes p_new: safe too;
    # p is read by the second loop, after the first wrote m_new: not safe.
    assert (1, 0) in pairs and (0, 1) not in pairs
    shifted = _ADAM_LOOPS.replace("%0 = affine.load %arg0[%arg5, %arg6]", "%0 = affine.load %arg0[%arg6, %arg5]")
    assert (0, 0) not in _in_place.in_place_pairs(shifted, 3, 2)
    copied = _ADAM_LOOPS.replace("    return\n", "    memref.copy %arg1, %arg3 : memref<4x8xf32> to memref<4x8xf32>\n"
                                 "    return\n")
    assert not any(i == 1 or j == 0 for i, j in _in_place.in_place_pairs(copied, 3, 2))



def _loops_of(kernel: MLIRKernel, *tensors: torch.Tensor) -> str:
    """The affine loops the in-place analysis read when ``kernel`` compiled."""
    seen: list[str] = []
    analyse = _in_place.in_place_pairs

    def spy(text: str, *args: int) -> frozenset[tuple[int, int]]:
        seen.append(text)
        return analyse(text, *args)

    _in_place.in_place_pairs = spy
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", NPUKernelFallbackWarning)
            kernel.run(*tensors)
    finally:
        _in_place.in_place_pairs = analyse
    assert len(seen) == 1
    return seen[0]


def _top_level_loops(loops_text: str) -> int:
    # The function body's ops are indented by four spaces.
    return sum(1 for line in loops_text.splitlines() if line.startswith("    affine.for "))


@needs_mlir
def test_an_elementwise_kernel_of_several_results_is_one_loop_nest(tmp_path, monkeypatch):
    # Note [One loop nest for an elementwise kernel's results]: Adam's update
    # (exp_avg's new value is a result and feeds the parameter's) was one
    # loop nest per result; the step count's arithmetic is hoisted.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))  # compiled here, not loaded
    program = _program(
        "v0 = torch.ops.aten.lerp.Scalar(in1, in2, 0.1)",          # exp_avg
        "v1 = torch.ops.aten.add.Tensor(in3, 1.0)",                # step + 1
        "v2 = torch.ops.aten.pow.Scalar(0.9, v1)",
        "v3 = torch.ops.aten.rsub.Scalar(v2, 1.0)",
        "v4 = torch.ops.aten.div.Tensor(v0, v3)",
        "v5 = torch.ops.aten.sub.Tensor(in0, v4, alpha=0.01)",     # parameter
        "return (v0, v5)", inputs=4)
    kernel = MLIRKernel("mlir_fused_test_adam_like_0", program, 4, 2, 0)
    torch.manual_seed(0)
    p, m, g = (torch.randn(1000, device="npu") for _ in range(3))
    step = torch.tensor(3.0, device="npu")
    m_new, p_new = torch.empty_like(m), torch.empty_like(p)
    loops = _loops_of(kernel, p, m, g, step, m_new, p_new)
    assert _top_level_loops(loops) == 1, loops
    expected_m = torch.lerp(m.cpu(), g.cpu(), 0.1)
    expected_p = p.cpu() - 0.01 * expected_m / (1 - 0.9 ** (step.cpu() + 1))
    torch.testing.assert_close(m_new.cpu(), expected_m)
    torch.testing.assert_close(p_new.cpu(), expected_p)


@needs_mlir
def test_a_reducing_kernel_keeps_its_loop_nests(tmp_path, monkeypatch):
    # The passes' dependence analysis takes distinct memrefs for distinct
    # buffers, which a reduction's views of its accumulator are not: with
    # them, softmax gave wrong results.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    program = _program("v0 = torch.ops.aten._softmax.default(in0, 1, False)", "return (v0,)")
    kernel = MLIRKernel("mlir_fused_test_softmax_rows_0", program, 1, 1, 0)
    x = torch.randn(4, 8, device="npu")
    out = torch.empty_like(x)
    loops = _loops_of(kernel, x, out)
    assert _top_level_loops(loops) > 1
    torch.testing.assert_close(out.cpu(), torch.softmax(x.cpu(), 1))
