"""Autocast and gradient scaling on npu: torch.autocast("npu"), torch.npu.amp."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_npu
import torch_npu.ops
from _training_models import SmallGPT, images, small_cnn, tokens

LOWER = [torch.float16, torch.bfloat16]


_RAND_DEVICE = ["npu"]  # where rand() puts its tensors (see on_cpu)


def rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).to(dtype).to(_RAND_DEVICE[0])


def on_cpu(fn):
    """fn() with rand() making the same tensors on the CPU."""
    _RAND_DEVICE[0] = "cpu"
    try:
        return fn()
    finally:
        _RAND_DEVICE[0] = "npu"


# --------------------------------------------------------------------------
# The API surface
# --------------------------------------------------------------------------


def test_supported_dtypes_and_default_dtype():
    assert torch.npu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.get_autocast_dtype("npu") == torch.float16  # as on CUDA and Ascend
    assert torch.amp.is_autocast_available("npu")


def test_amp_module_is_reachable_under_every_name():
    import torch.npu.amp as by_torch_name
    import torch_npu.npu.amp as by_package_name
    from torch.npu.amp.grad_scaler import GradScaler as scaler_class
    from torch_npu.npu.amp import autocast as autocast_class

    assert torch.npu.amp is torch_npu.npu.amp is by_torch_name is by_package_name
    assert sys.modules["torch.npu.amp"] is sys.modules["torch_npu.npu.amp"] is torch_npu.ops.amp
    assert scaler_class is torch.npu.amp.GradScaler
    assert autocast_class is torch.npu.amp.autocast
    assert issubclass(torch.npu.amp.autocast, torch.autocast)
    assert issubclass(torch.npu.amp.GradScaler, torch.amp.GradScaler)


def test_npu_amp_spellings_work_without_warnings(recwarn):
    # torch_npu's own API (accelerate calls torch.npu.amp.GradScaler for npu):
    # unlike torch.cuda.amp's, not deprecated, so silent.
    a = rand(4, 4)
    with torch.npu.amp.autocast():
        assert torch.is_autocast_enabled("npu")
        assert (a @ a).dtype == torch.float16
    with torch.npu.amp.autocast(dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("npu")
    scaler = torch.npu.amp.GradScaler(init_scale=8.0)
    assert scaler.is_enabled() and scaler.scale(a).cpu().equal(a.cpu() * 8)
    fwd = torch.npu.amp.custom_fwd(cast_inputs=torch.float32)
    bwd = torch.npu.amp.custom_bwd(lambda ctx, g: g)
    assert callable(fwd) and callable(bwd)
    assert [str(w.message) for w in recwarn] == []


def test_decorator_form():
    @torch.autocast("npu", dtype=torch.bfloat16)
    def f(x: torch.Tensor) -> torch.Tensor:
        return x @ x

    assert f(rand(3, 3)).dtype == torch.bfloat16


def test_unsupported_dtype_disables_autocast_with_a_warning():
    with pytest.warns(UserWarning, match="Disabling autocast"):
        ctx = torch.autocast("npu", dtype=torch.float64)
    with ctx:
        assert not torch.is_autocast_enabled("npu")
        a = rand(3, 3)
        assert (a @ a).dtype == torch.float32


def test_without_the_ops_plugin_autocast_is_disabled_not_broken():
    # Core alone (plugins disabled) has no autocast kernels: it must say so
    # and let torch turn autocast off rather than fail in the dispatcher.
    script = textwrap.dedent(
        """
        import warnings
        import torch, torch_npu
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert torch.npu.get_amp_supported_dtype() == []
            with torch.autocast("npu", dtype=torch.float16):
                assert not torch.is_autocast_enabled("npu")
        assert any("torch-npu-ops" in str(w.message) for w in caught), caught
        assert not hasattr(torch.npu, "amp")
        print("ok")
        """
    )
    env = dict(os.environ, TORCH_NPU_DISABLE_PLUGINS="ops")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr


# --------------------------------------------------------------------------
# Casting policies
# --------------------------------------------------------------------------


LOWER_PRECISION_OPS = {
    "mm": lambda: torch.mm(rand(4, 5), rand(5, 3)),
    "matmul": lambda: torch.matmul(rand(2, 4, 5), rand(5, 3)),
    "bmm": lambda: torch.bmm(rand(2, 4, 5), rand(2, 5, 3)),
    "addmm": lambda: torch.addmm(rand(4, 3), rand(4, 5), rand(5, 3)),
    "baddbmm": lambda: torch.baddbmm(rand(2, 4, 3), rand(2, 4, 5), rand(2, 5, 3)),
    "addbmm": lambda: torch.addbmm(rand(4, 3), rand(2, 4, 5), rand(2, 5, 3)),
    "mv": lambda: torch.mv(rand(4, 5), rand(5)),
    "linear": lambda: F.linear(rand(4, 5), rand(3, 5), rand(3)),
    "conv1d": lambda: F.conv1d(rand(2, 3, 9), rand(4, 3, 3), rand(4)),
    "conv2d": lambda: F.conv2d(rand(2, 3, 7, 7), rand(4, 3, 3, 3), rand(4), padding=1),
    "conv3d": lambda: F.conv3d(rand(1, 2, 5, 5, 5), rand(3, 2, 3, 3, 3)),
    "conv_transpose2d": lambda: F.conv_transpose2d(rand(2, 4, 5, 5), rand(4, 3, 3, 3), stride=2),
    "prelu": lambda: F.prelu(rand(2, 3, 4), rand(3)),
    "chain_matmul": lambda: torch.chain_matmul(rand(3, 4), rand(4, 5), rand(5, 2)),
    "multi_dot": lambda: torch.linalg.multi_dot([rand(3, 4), rand(4, 5), rand(5, 2)]),
    "einsum": lambda: torch.einsum("ij,jk->ik", rand(3, 4), rand(4, 2)),
    "sdpa": lambda: F.scaled_dot_product_attention(rand(2, 2, 5, 4), rand(2, 2, 5, 4), rand(2, 2, 5, 4)),
}


@pytest.mark.filterwarnings("ignore:torch.chain_matmul is deprecated")
@pytest.mark.parametrize("dtype", LOWER, ids=str)
@pytest.mark.parametrize("name", list(LOWER_PRECISION_OPS))
def test_lower_precision_ops(name, dtype):
    fn = LOWER_PRECISION_OPS[name]
    expected = fn()
    with torch.autocast("npu", dtype=dtype):
        actual = fn()
    assert actual.device.type == "npu" and actual.dtype == dtype
    # Computed from rounded inputs: close to the fp32 result, not equal.
    tol = 2e-2 if dtype == torch.float16 else 8e-2
    torch.testing.assert_close(actual.float().cpu(), expected.cpu(), atol=tol * 4, rtol=tol)
    # Where CPU autocast casts the op the same way (all but mv, which only
    # CUDA's list has), npu runs the CPU's kernel on the same inputs: equal.

    def cpu_autocast():
        with torch.autocast("cpu", dtype=dtype):
            return fn()

    on_the_cpu = on_cpu(cpu_autocast)
    if on_the_cpu.dtype == dtype:
        torch.testing.assert_close(actual.cpu(), on_the_cpu, atol=0, rtol=0)
    else:
        assert name == "mv", f"{name}: CPU autocast gives {on_the_cpu.dtype}"


FP32_OPS = {
    "softmax": lambda x: torch.softmax(x, -1),
    "log_softmax": lambda x: F.log_softmax(x, -1),
    "exp": torch.exp,
    "log": lambda x: torch.log(x.abs()),
    "pow": lambda x: torch.pow(x, 2),
    "sum": torch.sum,
    "sum_dim": lambda x: torch.sum(x, dim=1),
    "prod": lambda x: torch.prod(x, dim=0),
    "cumsum": lambda x: torch.cumsum(x, 0),
    "norm": lambda x: torch.norm(x),
    "vector_norm": lambda x: torch.linalg.vector_norm(x, dim=1),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
    "group_norm": lambda x: F.group_norm(x.unsqueeze(0), 1),
    "mse_loss": lambda x: F.mse_loss(x, x.flip(0)),
    "nll_loss": lambda x: F.nll_loss(x, torch.zeros(x.shape[0], dtype=torch.long, device=x.device)),
    "bce_with_logits": lambda x: F.binary_cross_entropy_with_logits(x, (x > 0).to(x.dtype)),
    "cdist": lambda x: torch.cdist(x, x),
}


@pytest.mark.parametrize("name", list(FP32_OPS))
def test_fp32_ops(name):
    fn = FP32_OPS[name]
    x16 = rand(4, 6, dtype=torch.float16)
    with torch.autocast("npu", dtype=torch.float16):
        out = fn(x16)
    assert out.device.type == "npu" and out.dtype == torch.float32
    torch.testing.assert_close(out.cpu(), fn(x16.cpu().float()), atol=1e-4, rtol=1e-4)


def test_fp32_policy_respects_an_explicit_dtype():
    x = rand(3, 4, dtype=torch.float16)
    with torch.autocast("npu"):
        assert torch.softmax(x, -1, dtype=torch.float16).dtype == torch.float16
        assert torch.sum(x, dtype=torch.float64).dtype == torch.float64
        # Mixed through a matmul: the fp16 result goes back to fp32 for softmax.
        assert torch.softmax(x.float() @ x.float().t(), -1).dtype == torch.float32


def test_binary_cross_entropy_is_banned_as_on_cuda():
    p = torch.rand(4, device="npu")
    with torch.autocast("npu"):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(p, p)
    # Fine outside autocast.
    torch.testing.assert_close(F.binary_cross_entropy(p, p).cpu(), F.binary_cross_entropy(p.cpu(), p.cpu()))


PROMOTE_OPS = {
    "addcmul": lambda a, b: torch.addcmul(a, b, b),
    "addcdiv": lambda a, b: torch.addcdiv(a, b, b),
    "atan2": torch.atan2,
    "cross": lambda a, b: torch.cross(a[:, :3], b[:, :3], dim=1),
    "dot": lambda a, b: torch.dot(a[0], b[0]),
    "tensordot": lambda a, b: torch.tensordot(a, b, dims=([1], [1])),
    "scatter_add": lambda a, b: a.scatter_add(1, torch.zeros_like(b, dtype=torch.long), b),
    "index_put": lambda a, b: a.index_put((torch.tensor([0, 2], device=a.device),), b[:2]),
    "bilinear": lambda a, b: F.bilinear(a, b, torch.ones(2, 4, 4, device=a.device, dtype=b.dtype)),
    "grid_sampler": lambda a, b: F.grid_sample(
        a.view(1, 1, 4, 4), b.view(1, 2, 4, 2)[:, :, :, :2].clamp(-1, 1), align_corners=False),
}


@pytest.mark.parametrize("name", list(PROMOTE_OPS))
def test_promote_ops(name):
    fn = PROMOTE_OPS[name]
    a32, b16 = rand(4, 4), rand(4, 4, dtype=torch.float16, seed=1)
    with torch.autocast("npu", dtype=torch.float16):
        mixed = fn(a32, b16)  # fp32 wins
        low = fn(a32.half(), b16)  # all fp16 stays fp16
    assert mixed.dtype == torch.float32 and low.dtype == torch.float16
    torch.testing.assert_close(mixed.cpu(), fn(a32.cpu(), b16.cpu().float()), atol=1e-4, rtol=1e-4)


def test_cat_and_stack_promote_by_themselves():
    a32, b16 = rand(2, 3), rand(2, 3, dtype=torch.float16)
    with torch.autocast("npu"):
        assert torch.cat([a32, b16]).dtype == torch.float32
        assert torch.stack([b16, b16]).dtype == torch.float16


def test_ineligible_inputs_are_left_alone():
    with torch.autocast("npu"):
        d = rand(3, 3, dtype=torch.float64)
        assert (d @ d).dtype == torch.float64  # double is never autocast
        i = torch.arange(9, device="npu").view(3, 3)
        assert (i @ i).dtype == torch.int64
        c = torch.randn(3, 3)  # a CPU tensor: npu autocast does not touch it
        assert (c @ c).dtype == torch.float32


# --------------------------------------------------------------------------
# Regions: nesting, disabling, other devices' autocast
# --------------------------------------------------------------------------


def test_nested_and_disabled_regions_restore_state():
    a = rand(3, 3)
    assert not torch.is_autocast_enabled("npu")
    with torch.autocast("npu", dtype=torch.float16):
        assert (a @ a).dtype == torch.float16
        with torch.autocast("npu", dtype=torch.bfloat16):
            assert (a @ a).dtype == torch.bfloat16
            with torch.autocast("npu", enabled=False):
                assert not torch.is_autocast_enabled("npu")
                assert (a @ a).dtype == torch.float32
            assert (a @ a).dtype == torch.bfloat16
        assert torch.get_autocast_dtype("npu") == torch.float16
        assert (a @ a).dtype == torch.float16
    assert not torch.is_autocast_enabled("npu")
    assert (a @ a).dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fused_attention_paths_give_the_unfused_paths_dtypes(dtype):
    # Note [The fused attention path under autocast]: under autocast, eval-mode
    # nn.MultiheadAttention returns the autocast dtype and float32 weights,
    # and nn.TransformerEncoderLayer float32 (its last op is a layer norm),
    # as CUDA's unfused paths do, whichever path torch takes; the values are
    # float32's within the autocast dtype's precision.
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, batch_first=True).eval().npu()
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True).eval().npu()
    x = torch.randn(2, 5, 16).npu()
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]]).npu()

    def run():
        out, weights = mha(x, x, x)
        unweighted, none = mha(x, x, x, need_weights=False)
        return [out, weights, unweighted, layer(x), layer(x, src_key_padding_mask=padding)], none

    with torch.no_grad():
        expected, _ = run()
        with torch.autocast("npu", dtype=dtype):
            got, none = run()
    assert none is None
    assert [t.dtype for t in got] == [dtype, torch.float32, dtype, torch.float32, torch.float32]
    tolerance = 3e-2 if dtype == torch.bfloat16 else 4e-3
    for g, e in zip(got, expected, strict=True):
        if e.is_nested:
            g, e = g.to_padded_tensor(0.0), e.to_padded_tensor(0.0)
        torch.testing.assert_close(g.float().cpu(), e.cpu(), rtol=tolerance, atol=tolerance)


def test_cpu_autocast_and_npu_autocast_are_independent():
    a, c = rand(3, 3), torch.randn(3, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (c @ c).dtype == torch.bfloat16
        assert (a @ a).dtype == torch.float32
    with torch.autocast("npu", dtype=torch.float16), torch.autocast("cpu", dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.float16 and (c @ c).dtype == torch.bfloat16


def test_exceptions_inside_the_region_restore_state():
    with pytest.raises(ValueError):
        with torch.autocast("npu", dtype=torch.bfloat16):
            raise ValueError
    assert not torch.is_autocast_enabled("npu")
    assert torch.get_autocast_dtype("npu") == torch.float16


# --------------------------------------------------------------------------
# Ops without a policy (fallthrough) and autograd
# --------------------------------------------------------------------------


def test_ops_without_a_policy_fall_through():
    # Each of these used to fail with "Could not run ... from the
    # 'AutocastPrivateUse1' backend".
    with torch.autocast("npu"):
        weight = torch.randn(10, 4, device="npu")
        idx = torch.tensor([[1, 2], [3, 9]], device="npu")
        emb = F.embedding(idx, weight)
        assert emb.dtype == torch.float32 and emb.shape == (2, 2, 4)
        torch.testing.assert_close(emb.cpu(), F.embedding(idx.cpu(), weight.cpu()))
        x = torch.empty(3, device="npu").normal_()
        y = (x * 2 + 1).relu().max()
        assert y.dtype == torch.float32
        z = torch.zeros(2, 2, device="npu")
        z.copy_(torch.ones(2, 2))
        assert z.cpu().sum().item() == 4
        h = F.dropout(torch.ones(8, device="npu"), 0.5)
        assert h.dtype == torch.float32


def test_embedding_model_under_autocast():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(20, 8), nn.Linear(8, 4)).npu()
    idx = torch.randint(0, 20, (3, 5)).npu()
    with torch.autocast("npu", dtype=torch.bfloat16):
        out = model(idx)
    assert out.dtype == torch.bfloat16 and out.shape == (3, 5, 4)
    out.float().sum().backward()
    assert model[0].weight.grad.dtype == torch.float32


def test_backward_under_autocast_gives_fp32_grads_close_to_cpu_autocast():
    torch.manual_seed(0)
    cpu_model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    npu_model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    npu_model.load_state_dict(cpu_model.state_dict())
    npu_model.npu()
    x = torch.randn(8, 16)
    target = torch.randint(0, 4, (8,))

    def grads(model, device):
        with torch.autocast(device, dtype=torch.bfloat16):
            out = model(x.to(device))
            assert out.dtype == torch.bfloat16
            loss = F.cross_entropy(out, target.to(device))
            assert loss.dtype == torch.float32  # log_softmax/nll_loss run in fp32
        loss.backward()
        return loss.item(), [p.grad.cpu() for p in model.parameters()]

    cpu_loss, cpu_grads = grads(cpu_model, "cpu")
    npu_loss, npu_grads = grads(npu_model, "npu")
    assert abs(cpu_loss - npu_loss) < 1e-2
    for c, n in zip(cpu_grads, npu_grads):
        assert n.dtype == torch.float32
        torch.testing.assert_close(n, c, atol=2e-2, rtol=5e-2)


def weight_casts(outputs: list[torch.Tensor], weight: torch.Tensor) -> int:
    """How many distinct autograd cast nodes lead from `outputs` to `weight`."""
    casts, seen = set(), set()
    stack = [o.grad_fn for o in outputs]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for child, _ in node.next_functions:
            if child is not None and getattr(child, "variable", None) is weight:
                casts.add(node)
            stack.append(child)
    return len(casts)


@pytest.mark.parametrize("cache_enabled", [True, False])
def test_weight_cast_cache(cache_enabled):
    # A leaf fp32 weight used twice in one region is cast once (autocast's
    # cast cache), unless the cache is off.
    w = torch.randn(4, 4, device="npu", requires_grad=True)
    x = torch.randn(2, 4, device="npu")
    with torch.autocast("npu", cache_enabled=cache_enabled):
        a = F.linear(x, w)
        b = F.linear(x, w)
    assert a.dtype == torch.float16 and torch.equal(a.cpu(), b.cpu())
    assert weight_casts([a, b], w) == (1 if cache_enabled else 2)
    (a.float().sum() + b.float().sum()).backward()
    torch.testing.assert_close(w.grad.cpu(), 2 * x.cpu().sum(0).expand(4, 4), atol=1e-2, rtol=1e-2)


def test_custom_autograd_function_decorators():
    class Square(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="npu", cast_inputs=torch.float32)
        def forward(ctx, x):
            ctx.save_for_backward(x)
            assert not torch.is_autocast_enabled("npu") and x.dtype == torch.float32
            return x @ x

        @staticmethod
        @torch.amp.custom_bwd(device_type="npu")
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad @ x.t() + x.t() @ grad

    x = torch.randn(3, 3, device="npu", requires_grad=True)
    with torch.autocast("npu"):
        y = Square.apply(x.half())
    assert y.dtype == torch.float32
    y.sum().backward()
    assert x.grad is not None



@pytest.mark.parametrize("use_reentrant", [False, True], ids=["non-reentrant", "reentrant"])
def test_activation_checkpointing_recomputes_under_autocast(use_reentrant):
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8)).npu()
    x = torch.randn(4, 8, device="npu", requires_grad=True)

    def grads(fn):
        model.zero_grad()
        x.grad = None
        with torch.autocast("npu", dtype=torch.bfloat16):
            y = fn(x)
        assert y.dtype == torch.bfloat16
        y.float().sum().backward()
        return [p.grad.cpu() for p in model.parameters()] + [x.grad.cpu()]

    plain = grads(model)
    recomputed = grads(lambda t: checkpoint(model, t, use_reentrant=use_reentrant))
    for a, b in zip(plain, recomputed):
        torch.testing.assert_close(b, a)


# --------------------------------------------------------------------------
# GradScaler
# --------------------------------------------------------------------------


def test_grad_scaler_kernels_run_asynchronously():
    grads = [rand(5), rand(3, 3), rand(4, dtype=torch.float16)]
    found_inf = torch.zeros((), device="npu")
    inv_scale = torch.full((), 0.5, device="npu")
    scale = torch.full((), 2.0, device="npu")
    tracker = torch.zeros((), dtype=torch.int32, device="npu")
    # The first call of each signature waits for its kernel (Note [Errors at
    # the call] in ops' csrc/CallVerification.h): a training step's later
    # calls must not.
    torch._amp_foreach_non_finite_check_and_unscale_([g.clone() for g in grads[:2]], found_inf.clone(), inv_scale)
    torch._amp_foreach_non_finite_check_and_unscale_([grads[2].clone()], found_inf.clone(), inv_scale)
    torch._amp_update_scale_(scale.clone(), tracker.clone(), found_inf, 2.0, 0.5, 2)
    before = [g.cpu() for g in grads]
    torch.npu.synchronize()
    torch_npu.ops.reset_execution_counters()
    torch.npu._sleep(50 * torch.npu._cycles_per_ms())  # the host must not wait for this
    torch._amp_foreach_non_finite_check_and_unscale_(grads[:2], found_inf, inv_scale)
    torch._amp_foreach_non_finite_check_and_unscale_(grads[2:], found_inf, inv_scale)
    torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 2)
    assert not torch.npu.current_stream().query()
    assert torch_npu.ops.synchronous_ops() == {}
    for g, b in zip(grads, before):
        torch.testing.assert_close(g.cpu(), b * 0.5)
    assert found_inf.item() == 0 and tracker.item() == 1 and scale.item() == 2.0

    grads[0][1] = float("inf")
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
    torch._amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 2)
    assert found_inf.item() == 1 and tracker.item() == 0 and scale.item() == 1.0


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def vectors(g):
    return torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)


def train(make, data, device, *, dtype=None, scaler=None, steps=20, optimizer_kwargs=None):
    """Losses of `steps` AdamW steps on one fixed batch, with autocast to
    `dtype` (None: plain fp32) and optionally a GradScaler."""
    torch.manual_seed(0)
    model = make().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, **(optimizer_kwargs or {}))
    x, y = data(torch.Generator().manual_seed(1))
    x, y = x.to(device), y.to(device)
    losses = []
    for _ in range(steps):
        with torch.autocast(device, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        losses.append(loss.item())
    return losses


# (model, batch, the fraction of its first loss that 20 steps bring it under)
MODELS = [(mlp, vectors, 0.01), (small_cnn, images, 0.75), (SmallGPT, tokens, 0.05)]
MODEL_IDS = ["mlp", "cnn", "gpt"]


@pytest.mark.parametrize("optimizer_kwargs", [{"foreach": False}, {"foreach": True}, {"fused": True}],
                         ids=["for-loop", "foreach", "fused"])
@pytest.mark.parametrize("make,data,learnt", MODELS, ids=MODEL_IDS)
def test_grad_scaler_fp16_training_matches_cpu(make, data, learnt, optimizer_kwargs):
    cpu_fp32 = train(make, data, "cpu")
    cpu_bf16 = train(make, data, "cpu", dtype=torch.bfloat16)
    scaler = torch.amp.GradScaler("npu")
    npu_fp16 = train(make, data, "npu", dtype=torch.float16, scaler=scaler, optimizer_kwargs=optimizer_kwargs)
    assert cpu_fp32[-1] < learnt * cpu_fp32[0]  # it learns the batch
    for reference in (cpu_fp32, cpu_bf16):
        for a, b in zip(reference, npu_fp16):
            assert abs(a - b) < 0.01 + 0.02 * a, (reference, npu_fp16)
    assert scaler.get_scale() >= 1.0


def test_grad_scaler_skips_steps_with_inf_grads():
    torch.manual_seed(0)
    model = mlp().npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("npu", init_scale=1024.0, growth_interval=1)
    x, y = (t.npu() for t in vectors(torch.Generator().manual_seed(1)))

    def step(inject_inf: bool) -> None:
        with torch.autocast("npu"):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        if inject_inf:
            model[0].weight.grad[0, 0] = float("inf")
        scaler.step(opt)
        scaler.update()

    step(False)
    assert scaler.get_scale() == 2048.0  # grew (growth_interval=1)
    params = [p.detach().cpu().clone() for p in model.parameters()]
    step(True)
    assert scaler.get_scale() == 1024.0  # backed off
    for p, q in zip(params, model.parameters()):
        assert torch.equal(p, q.detach().cpu())  # the step was skipped
    step(False)
    assert scaler.get_scale() == 2048.0
    assert not torch.equal(params[0], model[0].weight.detach().cpu())  # and training resumed
    assert all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.parametrize("optimizer_kwargs", [{"foreach": True}, {"fused": True}], ids=["foreach", "fused"])
def test_grad_scaler_adds_no_host_waits(optimizer_kwargs):
    # The scaler's own ops never make the host wait. As on CUDA, the only
    # wait of a scaler step is the found_inf .item() that decides whether to
    # step (a copy to the host, not an op of torch-npu-ops); optimizers that
    # read found_inf on the device (fused) do not even have that one.
    torch.manual_seed(0)
    model = mlp().npu()
    opt = torch.optim.AdamW(model.parameters(), **optimizer_kwargs)
    scaler = torch.amp.GradScaler("npu")
    x, y = (t.npu() for t in vectors(torch.Generator().manual_seed(1)))
    for _ in range(3):
        with torch.autocast("npu"):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        torch.npu.synchronize()
        torch_npu.ops.reset_execution_counters()
        torch.npu._sleep(200 * torch.npu._cycles_per_ms())
        scaler.step(opt)
        scaler.update()
        if optimizer_kwargs.get("fused"):
            assert not torch.npu.current_stream().query()  # the host never waited
        assert torch_npu.ops.synchronous_ops() == {}
        assert torch_npu.ops.execution_counters()["device_async"] > 0


def test_grad_scaler_state_dict_round_trip():
    scaler = torch.amp.GradScaler("npu", init_scale=256.0)
    scaler.scale(torch.ones(1, device="npu"))
    state = scaler.state_dict()
    assert state["scale"] == 256.0
    other = torch.amp.GradScaler("npu")
    other.load_state_dict(state)
    assert other.get_scale() == 256.0


@pytest.mark.parametrize("make,data,learnt", MODELS[1:], ids=MODEL_IDS[1:])
def test_autocast_bf16_training_matches_cpu_autocast(make, data, learnt):
    cpu_bf16 = train(make, data, "cpu", dtype=torch.bfloat16)
    npu_bf16 = train(make, data, "npu", dtype=torch.bfloat16)
    cpu_fp32 = train(make, data, "cpu")
    assert cpu_bf16[-1] < learnt * cpu_bf16[0] and npu_bf16[-1] < learnt * npu_bf16[0]  # it learns
    # bf16 keeps ~3 significant digits: the runs agree to a few thousandths.
    for reference in (cpu_bf16, cpu_fp32):
        for a, b in zip(reference, npu_bf16):
            assert abs(a - b) < 0.02 + 0.01 * a, (reference, npu_bf16)
