"""torch.compile on npu: Inductor with MLIR-compiled kernels, compared with
eager npu results.

Kernels compile once per program and shape and are cached on disk, so the
tests share one cache directory per session (a fresh one, so that the
counts of compilations are this session's)."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import warnings

import pytest
import torch
import torch._dynamo
from torch._inductor.utils import run_and_get_code

from torch_npu.graph import compile as npu_compile
from torch_npu.graph.compile import _mlir

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")


def _check(fn, *args, atol=1e-5, rtol=1e-5, **compile_kwargs):
    expected = fn(*args)
    compiled = torch.compile(fn, **compile_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", npu_compile.NPUKernelFallbackWarning)
        actual, codes = run_and_get_code(compiled, *args)
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)
    return codes


def _npu(*shape, **kw):
    return torch.randn(*shape, device="npu", **kw)


def test_registered_for_npu():
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._inductor.codegen.common import get_scheduling_for_device

    interface = get_interface_for_device("npu")
    assert interface.Stream is torch.npu.Stream and interface.Event is torch.npu.Event
    assert get_scheduling_for_device("npu").__name__ == "MLIRScheduling"


@needs_mlir
def test_pointwise_chain_wrapper_code():
    a, b = _npu(64, 32), _npu(64, 32)
    codes = _check(lambda a, b: torch.relu(a * b + 1.0) - a, a, b)
    code = codes[0]
    assert re.search(r"def call\((self, )?args\)", code)
    assert "def benchmark_compiled_module" in code
    # The kernel finds the current stream itself (Note [npu kernels find
    # their stream]): no stream lookup in Python per kernel.
    assert re.search(r"mlir_fused_mul_add_relu_sub_\d+\.run\(arg0_1, arg1_1, buf0\)", code)
    assert "get_raw_stream(" not in code


@needs_mlir
def test_benchmark_compiled_module_runs():
    from torch._inductor import codecache

    a, b = _npu(16, 8), _npu(16, 8)
    codes = _check(lambda a, b: (a * b).sin() + b, a, b)
    module = codecache.PyCodeCache.load(codes[0])
    module.benchmark_compiled_module(module.get_args(), times=1, repeat=1)


@needs_mlir
@pytest.mark.parametrize("name", ["sum", "amax_keepdim", "mean_all"])
def test_reductions(name):
    x = _npu(32, 48)
    fn = {
        "sum": lambda x: (x * 2).sum(-1),
        "amax_keepdim": lambda x: x.amax(0, keepdim=True) + x,
        "mean_all": lambda x: (x - 1).abs().mean(),
    }[name]
    codes = _check(fn, x, atol=1e-4, rtol=1e-4)
    assert "mlir_fused" in codes[0]


@needs_mlir
def test_softmax():
    x = _npu(8, 64)
    _check(lambda x: torch.softmax(x, -1), x, atol=1e-5, rtol=1e-4)


def _nonfinite_scores(*shape):
    # Rows of a (..., rows, columns) tensor: all -inf (a fully masked
    # attention row), one -inf entry, a nan, a +inf, and large values.
    x = _npu(*shape)
    x[..., 0, :] = float("-inf")
    x[..., 1, 3] = float("-inf")
    x[..., 2, 5] = float("nan")
    x[..., 3, 1] = float("inf")
    x[..., 4, :] *= 1e4
    return x


@needs_mlir
@pytest.mark.parametrize("scale", ["div", "mul", "mul_negative"])
def test_scaled_softmax_matches_eager_on_nonfinite_rows(scale):
    # Note [Scaled softmax without the finite-rows guard]: the kernel
    # computes softmax(x / c) as eager does, without Inductor's per-row
    # finiteness test and second amax.
    fn = {
        "div": lambda x: torch.softmax(x / 5.65, dim=-1),
        "mul": lambda x: torch.softmax(x * 0.125, dim=-1),
        "mul_negative": lambda x: torch.softmax(x * -0.3, dim=-1),
    }[scale]
    x = _nonfinite_scores(2, 4, 16, 64)
    expected = fn(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", npu_compile.NPUKernelFallbackWarning)
        actual, codes = run_and_get_code(torch.compile(fn), x)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-4, equal_nan=True)
    # (assert_close compared the nans too; a row of all -inf or +inf is nan.)
    assert actual[..., 0, :].isnan().all()
    program = "\n".join(codes)
    assert "amax" in program and "where" not in program and "logical_not" not in program


def test_scaled_softmax_guard_left_when_branches_differ():
    from torch.fx.experimental.proxy_tensor import make_fx

    from torch_npu.graph.compile._scaled_softmax import restore_scaled_softmax

    def guarded(x, stable_scale):
        scaled = x / 4.0
        original = scaled - scaled.amax(-1, keepdim=True)
        signed = x * 1
        stable = (signed - signed.amax(-1, keepdim=True)) / stable_scale
        finite = torch.isfinite(scaled).all(-1, keepdim=True)
        return torch.where(finite, stable, original)

    x = torch.randn(3, 8)
    decompositions = torch._decomp.core_aten_decompositions()
    for stable_scale, replaced in ((4.0, 1), (2.0, 0)):
        gm = make_fx(lambda x: guarded(x, stable_scale), decomposition_table=decompositions)(x)
        wheres = [n for n in gm.graph.nodes if n.target is torch.ops.aten.where.self]
        assert len(wheres) == 1
        assert restore_scaled_softmax(gm.graph) == replaced
        gm.recompile()
        assert any(n.target is torch.ops.aten.where.self for n in gm.graph.nodes) == (replaced == 0)
        torch.testing.assert_close(gm(x), guarded(x, stable_scale))


def test_layer_norm_and_var_mean():
    # var_mean is spelled out by the npu post-grad pass (_passes.py).
    x, w, b = _npu(8, 64), _npu(64), _npu(64)
    _check(lambda x, w, b: torch.nn.functional.layer_norm(x, (64,), w, b), x, w, b, atol=1e-4, rtol=1e-4)
    _check(lambda x: torch.var_mean(x, 0), x, atol=1e-5, rtol=1e-4)


@needs_mlir
def test_rms_norm_integer_power():
    x = _npu(4, 16, 32)
    _check(lambda x: torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * x.pow(3), x, atol=1e-4, rtol=1e-4)


@needs_mlir
def test_matmul_epilogue():
    x, w, b = _npu(16, 32), _npu(32, 24), _npu(24)
    codes = _check(lambda x, w, b: torch.nn.functional.gelu(x @ w + b), x, w, b, atol=1e-4, rtol=1e-4)
    assert "mlir_fused" in codes[0]


@needs_mlir
def test_gelu_backward_shares_its_gaussian_with_erf():
    # Note [GELU's Gaussian computed once]: erf(x / sqrt(2)) takes its
    # exponential in the same ops as the backward's exp(-x * x / 2).
    x = _npu(4, 16, 96) * 3
    x[0, 0, :4] = torch.tensor([0.0, -0.0, 1e-6, -9.0])
    g = _npu(4, 16, 96)
    codes = _check(lambda g, x: torch.ops.aten.gelu_backward(g, x), g, x, atol=1e-5, rtol=1e-5)
    assert "_erf_of_scaled(" in "\n".join(codes)
    # exact GELU forward and its gradient through autograd
    w = x.detach().requires_grad_()
    expected = torch.autograd.grad(torch.nn.functional.gelu(w).sum(), w)[0]
    compiled = torch.compile(lambda w: torch.autograd.grad(torch.nn.functional.gelu(w).sum(), w)[0])
    torch.testing.assert_close(compiled(w), expected, atol=1e-5, rtol=1e-5)


@needs_mlir
@pytest.mark.parametrize("op", ["sum", "amax", "amin", "any"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_innermost_reductions_in_lanes(op, keepdim):
    # Note [Innermost reductions in lanes]: a last dimension of 64 is
    # reduced in lanes, one of 40 (not a multiple of the lanes) as it is;
    # both must match eager. Rows holding inf, -inf or nan at various
    # positions check that every lane is combined (any: a single true
    # element decides the row).
    from torch_npu.graph.compile import _lanes

    for size, in_lanes in ((4 * _lanes.LANES, True), (40, False)):
        x = torch.randn(6, 5, size)
        x[0, 0, 3] = float("inf")
        x[1, 2, size - 1] = float("-inf")
        x[2, 4, size // 2 + 1] = float("nan")
        x = x.to("npu")
        if op == "any":
            fn = lambda x: torch.isinf(x * 2).any(-1, keepdim=keepdim)  # noqa: E731
        else:
            fn = lambda x: getattr(torch, op)(torch.relu(x) + x, -1, keepdim=keepdim)  # noqa: E731
        torch._dynamo.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("error", npu_compile.NPUKernelFallbackWarning)
            actual, codes = run_and_get_code(torch.compile(fn), x)
        torch.testing.assert_close(actual, fn(x), atol=1e-5, rtol=1e-5, equal_nan=True)
        assert ("_lane_reduce" in codes[0]) == in_lanes


@needs_mlir
@pytest.mark.parametrize("case", ["output", "input", "broadcast", "reduction"])
def test_bool_values_in_bytes(case):
    # Note [Bool values of a program in bytes] and Note [Bool tensors cross
    # the kernel boundary as bytes]: vectorised loops over bool buffers
    # (a kernel's output, its input, a reduction's result read by a
    # broadcast) must see torch's one byte per bool.
    x = _npu(64, 64, 64)
    mask = (x > 0.5).contiguous()
    fn, args = {
        "output": (lambda x: x > 0, (x,)),
        "input": (lambda m, x: torch.where(m, x, 0.0) + m.float(), (mask, x)),
        "broadcast": (lambda x: torch.where((x > 2).any(-1, keepdim=True), x, 0.0), (x,)),
        "reduction": (lambda x: (x > 1).to(torch.uint8).amax(-1) != 0, (x,)),
    }[case]
    _check(fn, *args)


class _Block(torch.nn.Module):
    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        # Attention spelled out: the backward of scaled_dot_product_attention
        # (an extern kernel) needs input copies Inductor gives no aten
        # origin, which the npu backend cannot compile yet.
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        b, t, d = h.shape
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def _check_block_step(d: int, x_shape: tuple[int, ...]) -> None:
    """A forward and backward of _Block(d) compiled, compared with eager: the
    output and every parameter's gradient; every kernel of both graphs must
    be an MLIR kernel (no fallback)."""
    torch.manual_seed(0)
    model = _Block(d=d).to("npu")
    x = _npu(*x_shape)
    eager_out = model(x)
    eager_out.square().mean().backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = torch.compile(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", npu_compile.NPUKernelFallbackWarning)
        out = compiled(x)
        out.square().mean().backward()
    torch.testing.assert_close(out, eager_out, atol=1e-4, rtol=1e-4)
    for got, want in zip([p.grad for p in model.parameters()], eager_grads):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-3)


@needs_mlir
def test_transformer_block_forward_backward():
    _check_block_step(32, (2, 8, 32))


@needs_mlir
def test_dynamic_shapes():
    fn = torch.compile(lambda x: torch.relu(x * 3.0).sum(0), dynamic=True)
    for n in (5, 9, 17):
        x = _npu(n, 4)
        torch.testing.assert_close(fn(x), torch.relu(x * 3.0).sum(0), atol=1e-5, rtol=1e-5)


@needs_mlir
def test_graph_break():
    def fn(x):
        y = torch.cos(x) * 2
        torch._dynamo.graph_break()
        return y.exp() + 1

    x = _npu(12)
    _check(fn, x, atol=1e-5, rtol=1e-5)


@needs_mlir
def test_exp_is_vectorised_and_keeps_special_values():
    # Note [Vectorised exp in MLIR kernels]: f32 exp is arithmetic in the
    # kernel, not libm calls; about 1 ulp from ATen's, and right at the edges.
    edges = [0.0, -0.0, 1.0, 88.72, 88.73, 1000.0, -87.4, -100.0, -104.0, float("inf"), -float("inf"), float("nan")]
    x = torch.cat([torch.randn(4096) * 30, torch.tensor(edges)]).to("npu")
    compiled = torch.compile(lambda x: x.exp())
    with warnings.catch_warnings():
        warnings.simplefilter("error", npu_compile.NPUKernelFallbackWarning)
        actual = compiled(x).cpu()
    expected = x.cpu().exp()
    torch.testing.assert_close(actual, expected, rtol=2.5e-7, atol=2e-45, equal_nan=True)
    library = sorted(glob.glob(os.path.join(npu_compile.kernel_cache_dir(), "*.so")), key=os.path.getmtime)[-1]
    with open(library, "rb") as f:
        assert b"expf" not in f.read()


@needs_mlir
def test_float_reciprocal_of_zero_is_inf():
    # torch-mlir asserts a non-zero divisor before a reciprocal; for floats
    # torch says 1 / 0 is inf, and the kernel must neither abort nor differ.
    x = torch.tensor([0.0, -0.0, 2.0, -4.0], device="npu")
    _check(lambda x: torch.reciprocal(x) * 2, x)


def test_eager_backend_option():
    x = _npu(10)
    codes = _check(lambda x: x.sigmoid() * x, x, options={"npu_backend": "eager"})
    assert "mlir_fused" in codes[0]


@needs_mlir
def test_unlowerable_op_falls_back_with_warning():
    # torch-mlir has no linalg lowering for this op: the kernel runs its aten
    # ops eagerly, with a warning naming it.
    x = _npu(8, 8)
    fn = torch.compile(lambda x: torch.special.i0e(x * 2) + 1)
    with pytest.warns(npu_compile.NPUKernelFallbackWarning, match=r"npu kernel mlir_fused_\w+"):
        out = fn(x)
    torch.testing.assert_close(out, torch.special.i0e(x * 2) + 1, atol=1e-5, rtol=1e-5)


def test_recompile_limit_message():
    fn = torch.compile(lambda x: x + 1, dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=2, fail_on_recompile_limit_hit=True):
        fn(_npu(1))
        fn(_npu(2))
        with pytest.raises(Exception, match="recompile_limit"):
            fn(_npu(3))


_NO_MLIR = """
import sys, warnings
sys.modules["torch_mlir"] = None  # as if torch-mlir were not installed
import torch, torch_npu
from torch_npu.graph.compile import NPUKernelFallbackWarning
x = torch.arange(6., device="npu")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = torch.compile(lambda x: x * 3 + 1)(x)
assert torch.equal(out.cpu(), (x * 3 + 1).cpu())
print([str(w.message) for w in caught if issubclass(w.category, NPUKernelFallbackWarning)])
"""


def test_without_torch_mlir_kernels_run_eagerly_with_a_warning(tmp_path):
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path), TORCHINDUCTOR_FX_GRAPH_CACHE="0")
    result = subprocess.run([sys.executable, "-c", _NO_MLIR], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "npu kernel mlir_fused_mul_add_0: MLIR cannot compile it (torch-mlir is not installed" in result.stdout


_OPTION_FIRST = """
import torch, torch_npu
x = torch.arange(4., device="npu")
out = torch.compile(lambda x: x * 2, options={"npu_backend": "eager"})(x)
assert torch.equal(out.cpu(), (x * 2).cpu())
print("ok")
"""


def test_npu_backend_option_in_a_fresh_process():
    # the option exists before torch.compile checks its options, i.e. before
    # Dynamo or Inductor have looked up any device
    result = subprocess.run([sys.executable, "-c", _OPTION_FIRST], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "ok"


_WARM = """
import torch, torch_npu
from torch_npu.graph import compile as npu_compile
x = torch.arange(12., device="npu")
out = torch.compile(lambda x: (x * 0.5 + 2).tanh() * x)(x)
assert torch.allclose(out.cpu(), ((x * 0.5 + 2).tanh() * x).cpu(), atol=1e-5)
s = npu_compile.kernel_stats()
print(int(s["compiled"]), int(s["loaded"]), int(s["rebuilt"]))
"""


def _run_child(cache: str) -> list[int]:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, TORCHINDUCTOR_FX_GRAPH_CACHE="0")
    result = subprocess.run([sys.executable, "-c", _WARM], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return [int(v) for v in result.stdout.split()[-3:]]


@needs_mlir
def test_warm_cache_and_corrupt_entry(tmp_path):
    cache = str(tmp_path)
    assert _run_child(cache) == [1, 0, 0]  # cold: compiled
    assert _run_child(cache) == [0, 1, 0]  # warm: loaded, no compilation
    (library,) = glob.glob(os.path.join(cache, "npu_mlir", "*.so"))
    with open(library, "r+b") as f:
        f.seek(100)
        f.write(b"corrupt!")
    assert _run_child(cache) == [1, 0, 1]  # detected, rebuilt
    assert _run_child(cache) == [0, 1, 0]


@needs_mlir
def test_strided_inputs():
    # a transposed input and a slice reach the kernel as strided views; the
    # kernel takes dense copies (MLIR's memrefs have the identity layout)
    x, y = _npu(24, 16), _npu(16, 48)
    _check(lambda a, b: (a * 2 + b).exp(), x.t(), y[:, ::2], atol=1e-5, rtol=1e-5)


@needs_mlir
def test_kernel_items_run_many_times():
    # Note [Device work items run many times]: a kernel's work item may run
    # again (graph replays); its result must not change.
    import torch_npu

    x = _npu(32)
    fn = torch.compile(lambda x: (x * 3).sin() + x)
    expected = fn(x)
    torch.npu.synchronize()
    torch_npu._C._set_work_runs_for_testing(3)
    try:
        out = fn(x)
        torch.npu.synchronize()
    finally:
        torch_npu._C._set_work_runs_for_testing(1)
    torch.testing.assert_close(out, expected)


@needs_mlir
def test_input_mutation_and_batch_norm_running_stats():
    # an input's in-place update and BatchNorm's running statistics are
    # buffers that mutate inputs: the kernel writes the input itself
    def bump(buf, x):
        buf.add_(x * 2)
        return buf.sum()

    x = _npu(16, 8)
    eager_buf, compiled_buf = torch.zeros(8, device="npu"), torch.zeros(8, device="npu")
    compiled_bump = torch.compile(bump)
    for _ in range(2):
        torch.testing.assert_close(compiled_bump(compiled_buf, x[0]), bump(eager_buf, x[0]))
    torch.testing.assert_close(compiled_buf, eager_buf)

    torch.manual_seed(0)
    eager_bn = torch.nn.BatchNorm1d(8).to("npu")
    compiled_bn = torch.nn.BatchNorm1d(8).to("npu")
    compiled_bn.load_state_dict(eager_bn.state_dict())
    compiled = torch.compile(compiled_bn)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), eager_bn(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(compiled_bn.running_mean, eager_bn.running_mean)
    torch.testing.assert_close(compiled_bn.running_var, eager_bn.running_var)


@needs_mlir
def test_mlir_kernels_declare_their_accesses_to_the_race_detector():
    # Note [Stream race detection]: a kernel reads its inputs and writes its
    # outputs (KernelLaunch.cpp).
    from torch_npu.npu import _race_check

    a, b = _npu(64, 32), _npu(64, 32)
    compiled = torch.compile(lambda a, b: torch.relu(a * b + 1.0))
    compiled(a, b).sum()
    b.mul_(1)  # compiled, and every op's first call done
    torch.npu.synchronize()
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with _race_check.enabled():
        with torch.npu.stream(s1):
            y = compiled(a, b)
        with torch.npu.stream(s2), pytest.raises(RuntimeError, match=r"read-after-write.*'mlir_fused"):
            y.sum()
        with torch.npu.stream(s2), pytest.raises(RuntimeError, match=r"write-after-read.*'mlir_fused"):
            b.mul_(2)
        s2.wait_stream(s1)
        with torch.npu.stream(s2):
            total = y.sum()
            b.mul_(2)
        torch.npu.synchronize()
    torch.testing.assert_close(total.cpu(), torch.relu(a.cpu() * b.cpu() / 2 + 1.0).sum())


# Note [Outer-dimension split of MLIR kernels]: large kernels whose rows are
# independent run as blocks of rows on up to torch.get_num_threads() threads.


@pytest.fixture
def _two_threads():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)


def _split_launches(fn, *args, atol=1e-5, rtol=1e-5):
    before = npu_compile.kernel_stats()["split_launches"]
    _check(fn, *args, atol=atol, rtol=rtol)
    return npu_compile.kernel_stats()["split_launches"] - before


def _rms_norm(x, w):
    return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * x * w


@needs_mlir
@pytest.mark.parametrize("rows", [2, 3, 257])
def test_outer_split_runs_rows_in_blocks_and_matches_eager(_two_threads, rows):
    # Odd row counts give blocks of two sizes (two block kernels); 3 rows
    # give a block of one row.
    columns = 40000 // rows + 7
    x, w = _npu(rows, columns), _npu(columns)
    assert _split_launches(lambda x, w: _rms_norm(x, w) + x.sin(), x, w, atol=1e-4, rtol=1e-4) >= 1


@needs_mlir
def test_outer_split_through_reshapes_and_softmax(_two_threads):
    # Attention's shapes: the softmax sees (b * h, t, t) rows, the outputs
    # (b, h, t, t); both keep the batch rows in blocks.
    x = _npu(5, 4, 48, 48)
    fn = lambda x: torch.softmax(x.reshape(20, 48, 48) * 0.125, dim=-1).reshape(5, 4, 48, 48) + 1.0  # noqa: E731
    assert _split_launches(fn, x, atol=1e-5, rtol=1e-4) >= 1


@needs_mlir
def test_outer_split_of_a_matmul_result_read_through_a_view(_two_threads):
    # The kernel after the matmul reads its (b * t, d) result, 64 rows per
    # outer row of the (b, t, d) output.
    x, w = _npu(6, 64, 128), _npu(128, 128)
    fn = lambda x, w: torch.relu((x.reshape(384, 128) @ w).view(6, 64, 128) + x)  # noqa: E731
    assert _split_launches(fn, x, w, atol=1e-4, rtol=1e-4) >= 1


@needs_mlir
@pytest.mark.parametrize("case", ["one_row", "rows_and_columns", "one_thread", "small"])
def test_outer_split_not_used_where_rows_are_not_independent(_two_threads, case):
    if case == "one_row":
        fn, args = (lambda x: x.exp() * 2), (_npu(1, 50000),)
    elif case == "rows_and_columns":
        # reads x by rows and by columns: no block of rows is independent
        fn, args = (lambda x: x.t() * 2 + x), (_npu(300, 300),)
    elif case == "one_thread":
        torch.set_num_threads(1)
        fn, args = (lambda x: x.exp() * 2), (_npu(300, 200),)
    else:
        fn, args = (lambda x: x.exp() * 2), (_npu(30, 20),)
    assert _split_launches(fn, *args, atol=1e-4, rtol=1e-5) == 0


@needs_mlir
def test_outer_split_blocks_run_on_torchs_openmp_runtime(_two_threads):
    # The launcher runs blocks with at::parallel_for on the OpenMP team of
    # the stream's thread, through torch's own libgomp: a second OpenMP
    # runtime in the process would bring a second team of threads.
    from torch_npu.graph.compile import _launch

    assert _launch.RUNS_BLOCKS_IN_PARALLEL
    x = _npu(64, 1024)
    assert _split_launches(lambda x: x.exp() * 2 + x, x, atol=1e-4, rtol=1e-5) >= 1
    with open("/proc/self/maps") as f:
        runtimes = {line.split()[-1] for line in f if re.search(r"lib(g|i)?omp[^/]*\.so", line)}
    torch_lib = os.path.realpath(os.path.join(os.path.dirname(torch.__file__), "lib"))
    assert runtimes and all(os.path.dirname(os.path.realpath(r)) == torch_lib for r in runtimes), runtimes


@needs_mlir
def test_outer_split_in_forward_and_backward_of_a_block(_two_threads):
    # The transformer block at the benchmark's size: its norms, softmax,
    # GELU and their gradients are split kernels.
    before = npu_compile.kernel_stats()["split_launches"]
    _check_block_step(128, (8, 64, 128))
    assert npu_compile.kernel_stats()["split_launches"] - before >= 5
