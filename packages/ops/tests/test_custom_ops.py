"""The custom ops of Ascend's torch_npu (torch.ops.npu.npu_*, torch_npu.npu_*):
values against straightforward CPU references written here, gradients
against autograd through those references, opcheck, and torch.compile."""

from __future__ import annotations

import inspect
import math
import pickle

import pytest
import torch

import torch_npu
from torch_npu.ops.custom import CUSTOM_OPS
from torch_npu.ops.custom._schema import SchemaOp

NPU = torch.device("npu")
MAX = 2147483647


def close(actual, expected, atol=1e-4, rtol=1e-4):
    torch.testing.assert_close(
        actual.detach().cpu().to(expected.dtype), expected.detach(), atol=atol, rtol=rtol
    )


def leaves(*tensors, device=NPU, dtype=None):
    """Copies of CPU tensors on ``device`` that require grad."""
    out = []
    for t in tensors:
        c = t.detach().to(device=device, dtype=dtype or t.dtype)
        out.append(c.requires_grad_())
    return out


def ref_leaves(*tensors):
    """float64 CPU copies that require grad (for the reference)."""
    return [t.detach().double().requires_grad_() for t in tensors]


# -- registration ----------------------------------------------------------------

OPS = (
    "npu_rms_norm", "npu_rotary_mul", "npu_swiglu", "npu_fusion_attention",
    "npu_fusion_attention_grad", "npu_dtype_cast", "npu_format_cast",
)


@pytest.mark.parametrize("name", OPS)
def test_registered_and_exported(name):
    assert hasattr(torch.ops.npu, name)
    fn = getattr(torch_npu, name)
    assert fn.__doc__
    # The Python signature is the op's schema (names and defaults).
    schema = getattr(torch.ops.npu, name).default._schema
    params = list(inspect.signature(fn).parameters.values())
    assert [p.name for p in params] == [a.name for a in schema.arguments]
    for p, a in zip(params, schema.arguments):
        if a.has_default_value():
            assert p.default == a.default_value, p.name
        else:
            assert p.default is inspect.Parameter.empty, p.name


def test_documented_signatures():
    sig = inspect.signature
    rms = sig(torch_npu.npu_rms_norm).parameters
    assert list(rms) == ["x", "gamma", "epsilon"] and rms["epsilon"].default == 1e-6
    assert list(sig(torch_npu.npu_rotary_mul).parameters) == ["x", "r1", "r2", "rotary_mode"]
    assert sig(torch_npu.npu_rotary_mul).parameters["rotary_mode"].default == "half"
    assert sig(torch_npu.npu_swiglu).parameters["dim"].default == -1
    fa = sig(torch_npu.npu_fusion_attention).parameters
    assert list(fa) == [
        "query", "key", "value", "head_num", "input_layout", "pse", "padding_mask",
        "atten_mask", "scale", "keep_prob", "pre_tockens", "next_tockens", "inner_precise",
        "prefix", "actual_seq_qlen", "actual_seq_kvlen", "sparse_mode", "gen_mask_parallel",
        "sync",
    ]
    defaults = {k: v.default for k, v in fa.items() if v.default is not inspect.Parameter.empty}
    assert defaults == {
        "pse": None, "padding_mask": None, "atten_mask": None, "scale": 1.0, "keep_prob": 1.0,
        "pre_tockens": MAX, "next_tockens": MAX, "inner_precise": 0, "prefix": None,
        "actual_seq_qlen": None, "actual_seq_kvlen": None, "sparse_mode": 0,
        "gen_mask_parallel": True, "sync": False,
    }
    grad = sig(torch_npu.npu_fusion_attention_grad).parameters
    assert list(grad)[:6] == ["query", "key", "value", "dy", "head_num", "input_layout"]
    assert grad["scale_value"].default == 1.0 and grad["seed"].default == 0
    assert list(sig(torch_npu.npu_dtype_cast).parameters) == ["input", "dtype"]
    assert list(sig(torch_npu.npu_format_cast).parameters) == ["input", "acl_format"]


@pytest.mark.parametrize("name", CUSTOM_OPS)
def test_python_signature_is_the_schema(name):
    """torch_npu.<name> takes exactly the arguments of torch.ops.npu.<name>:
    the same names, kinds and defaults (values and types), so that the two
    cannot drift apart."""
    fn = getattr(torch_npu, name)
    schema = getattr(torch.ops.npu, name).default._schema
    params = list(inspect.signature(fn).parameters.values())
    assert [p.name for p in params] == [a.name for a in schema.arguments]
    for p, a in zip(params, schema.arguments):
        kind = "KEYWORD_ONLY" if a.kwarg_only else "POSITIONAL_OR_KEYWORD"
        assert p.kind.name == kind, p.name
        if a.has_default_value():
            assert p.default == a.default_value, p.name
            assert type(p.default) is type(a.default_value), p.name
        else:
            assert p.default is inspect.Parameter.empty, p.name
    assert fn.__name__ == name
    # By reference, as torch.compile's and multiprocessing's pickling need.
    assert pickle.loads(pickle.dumps(fn)) is fn


def test_every_npu_custom_op_is_listed():
    from torch._library.custom_ops import OPDEFS

    defined = {q.split("::", 1)[1] for q in OPDEFS if q.startswith("npu::")}
    assert defined == set(CUSTOM_OPS)


def test_schema_op_keyword_only_arguments():
    """SchemaOp with keyword-only arguments (as many of Ascend's schemas
    have): the generated function, the kernel's and fake's Args (defaults
    filled in, however the call spelled them), autograd and opcheck."""
    op = SchemaOp("torch_npu_test::scaled(Tensor x, SymInt n=2, *, float alpha=0.5) -> Tensor")
    seen = []

    @op.register_kernel
    def _(args):
        seen.append((args.n, args.alpha))
        return args.x * (args.n * args.alpha)

    @op.register_fake
    def _(args):
        return torch.empty_like(args.x)

    def setup_context(ctx, args, output):
        ctx.factor = args.n * args.alpha

    op.register_autograd(lambda ctx, grad: (grad * ctx.factor, None), setup_context=setup_context)
    scaled = op.python_function(__name__, "x * n * alpha")
    assert scaled.__doc__ == "x * n * alpha"
    assert str(inspect.signature(scaled)) == (
        "(x: torch.Tensor, n: int = 2, *, alpha: float = 0.5) -> torch.Tensor"
    )
    assert op.Args._fields == ("x", "n", "alpha")

    x = torch.randn(3, requires_grad=True)
    y = scaled(x, alpha=3.0)
    assert seen[-1] == (2, 3.0)
    y.sum().backward()
    close(x.grad, torch.full((3,), 6.0))
    scaled(x.detach(), 4)
    assert seen[-1] == (4, 0.5)
    with pytest.raises(TypeError, match=r"scaled\(\) takes from 1 to 2 positional arguments"):
        scaled(x, 2, 3.0)
    torch.library.opcheck(op.overload, (x.detach(),), {"alpha": 2.0})
    torch.library.opcheck(op.overload, (torch.randn(3, requires_grad=True), 3))


def test_schema_op_rejects_bad_schemas():
    with pytest.raises(ValueError, match="schema string"):
        SchemaOp("torch_npu_test::no_arguments")
    with pytest.raises(ValueError, match="not allowed"):
        SchemaOp("torch_npu_test::bad_name(Tensor _npu_custom_op) -> Tensor")
    assert not hasattr(torch.ops.torch_npu_test, "bad_name")


# -- npu_rms_norm ----------------------------------------------------------------------


def ref_rms_norm(x, gamma, eps):
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    rstd = 1.0 / torch.sqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    return x * rstd * gamma, rstd


@pytest.mark.parametrize("gamma_shape", [(16,), (3, 16)])
def test_rms_norm_values_and_grads(gamma_shape):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 16, generator=g)
    gamma = torch.randn(gamma_shape, generator=g)
    xn, gn = leaves(x, gamma)
    y, rstd = torch_npu.npu_rms_norm(xn, gn, epsilon=1e-5)
    assert y.device.type == "npu" and y.dtype == x.dtype
    assert rstd.dtype == torch.float32
    assert rstd.shape == tuple(x.shape[: x.dim() - len(gamma_shape)]) + (1,) * len(gamma_shape)
    xr, gr = ref_leaves(x, gamma)
    y_ref, rstd_ref = ref_rms_norm(xr, gr, 1e-5)
    close(y, y_ref)
    close(rstd, rstd_ref)
    # Gradients through both outputs.
    wy, wr = torch.randn(y.shape, generator=g), torch.randn(rstd.shape, generator=g)
    ((y * wy.to(NPU)).sum() + (rstd * wr.to(NPU)).sum()).backward()
    ((y_ref * wy).sum() + (rstd_ref * wr).sum()).backward()
    close(xn.grad, xr.grad)
    close(gn.grad, gr.grad)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_rms_norm_half(dtype):
    g = torch.Generator().manual_seed(1)
    x, gamma = torch.randn(4, 32, generator=g), torch.randn(32, generator=g)
    xn, gn = leaves(x, gamma, dtype=dtype)
    y, rstd = torch_npu.npu_rms_norm(xn, gn)
    assert y.dtype == dtype and rstd.dtype == torch.float32
    y_ref, _ = ref_rms_norm(xn.detach().cpu().double(), gn.detach().cpu().double(), 1e-6)
    close(y, y_ref, atol=2e-2, rtol=2e-2)
    y.float().sum().backward()
    assert xn.grad.dtype == dtype and gn.grad.dtype == dtype


def test_rms_norm_rejects_mismatched_gamma():
    with pytest.raises(ValueError, match="gamma"):
        torch_npu.npu_rms_norm(torch.randn(2, 8, device=NPU), torch.randn(4, device=NPU))


# -- npu_rotary_mul --------------------------------------------------------------------


def ref_rotary(x, r1, r2, mode):
    d = x.shape[-1]
    if mode == "half":
        rot = torch.cat((-x[..., d // 2 :], x[..., : d // 2]), dim=-1)
    else:
        rot = torch.empty_like(x)
        rot[..., 0::2] = -x[..., 1::2]
        rot[..., 1::2] = x[..., 0::2]
    return x * r1 + rot * r2


@pytest.mark.parametrize("mode", ["half", "interleave"])
@pytest.mark.parametrize("table_shape", [(1, 5, 1, 8), (2, 5, 3, 8)])
def test_rotary_mul(mode, table_shape):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 5, 3, 8, generator=g)
    r1, r2 = torch.randn(table_shape, generator=g), torch.randn(table_shape, generator=g)
    xn, r1n, r2n = leaves(x, r1, r2)
    out = torch_npu.npu_rotary_mul(xn, r1n, r2n, rotary_mode=mode)
    xr, r1r, r2r = ref_leaves(x, r1, r2)
    ref = ref_rotary(xr, r1r, r2r, mode)
    close(out, ref)
    w = torch.randn(ref.shape, generator=g)
    (out * w.to(NPU)).sum().backward()
    (ref * w).sum().backward()
    for a, b in ((xn, xr), (r1n, r1r), (r2n, r2r)):
        close(a.grad, b.grad)


def test_rotary_mul_default_is_half_and_cos_sin_rotation():
    # With cos/sin tables, "half" rotates each (x[i], x[i + D/2]) pair.
    x = torch.randn(1, 4, 2, 8)
    theta = torch.rand(1, 4, 1, 4) * 3
    cos = torch.cat((theta.cos(), theta.cos()), -1)
    sin = torch.cat((theta.sin(), theta.sin()), -1)
    out = torch_npu.npu_rotary_mul(x.to(NPU), cos.to(NPU), sin.to(NPU)).cpu()
    x1, x2 = x[..., :4], x[..., 4:]
    c, s = theta.cos(), theta.sin()
    torch.testing.assert_close(out, torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1))


def test_rotary_mul_errors():
    x = torch.randn(1, 2, 1, 8, device=NPU)
    with pytest.raises(ValueError, match="rotary_mode"):
        torch_npu.npu_rotary_mul(x, x, x, "bogus")
    with pytest.raises(ValueError, match="broadcast"):
        torch_npu.npu_rotary_mul(x, torch.randn(2, 2, 1, 8, device=NPU), x)


# -- npu_swiglu ---------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_swiglu(dim):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 6, 10, generator=g)
    (xn,) = leaves(x)
    out = torch_npu.npu_swiglu(xn, dim=dim)
    (xr,) = ref_leaves(x)
    a, b = xr.chunk(2, dim=dim)
    ref = a * torch.sigmoid(a) * b
    assert out.shape == ref.shape
    close(out, ref)
    w = torch.randn(ref.shape, generator=g)
    (out * w.to(NPU)).sum().backward()
    (ref * w).sum().backward()
    close(xn.grad, xr.grad)


def test_swiglu_odd_size():
    with pytest.raises(ValueError, match="even"):
        torch_npu.npu_swiglu(torch.randn(3, 5, device=NPU))


# -- casts and formats ------------------------------------------------------------------


def test_dtype_cast():
    x = torch.randn(3, 4)
    (xn,) = leaves(x)
    y = torch_npu.npu_dtype_cast(xn, torch.float16)
    assert y.dtype == torch.float16 and y.device.type == "npu"
    close(y, x.half(), atol=0, rtol=0)
    (y.float() * 2).sum().backward()
    assert xn.grad.dtype == torch.float32
    close(xn.grad, torch.full((3, 4), 2.0), atol=0, rtol=0)
    same = torch_npu.npu_dtype_cast(xn.detach(), torch.float32)
    assert same.data_ptr() != xn.data_ptr()
    close(torch_npu.npu_dtype_cast(xn.detach(), torch.int32), x.int(), atol=0, rtol=0)


def test_format_cast_and_get_npu_format_agree():
    x = torch.randn(2, 3, 4, 5, device=NPU)
    # base formats by dimensions, as on CANN
    assert torch_npu.get_npu_format(x) == torch_npu.Format.NCHW == 0
    assert torch_npu.get_npu_format(torch.ones(2, 3, 4, 5, 6, device=NPU)) == torch_npu.Format.NCDHW
    assert torch_npu.get_npu_format(torch.ones(3, 4, device=NPU)) == torch_npu.Format.ND
    for fmt in (0, 2, 29, torch_npu.Format.NC1HWC0):
        y = torch_npu.npu_format_cast(x, fmt)
        assert y.data_ptr() != x.data_ptr()
        assert torch_npu.get_npu_format(y) == fmt
        assert isinstance(torch_npu.get_npu_format(y), torch_npu.Format)
        close(y, x.cpu(), atol=0, rtol=0)
    assert str(torch_npu.get_npu_format(torch_npu.npu_format_cast(x, 29))) == "FRACTAL_NZ"
    assert torch_npu.get_npu_format(x) == 0  # the source keeps its own
    assert torch_npu.npu_format_cast_(x, 29) is x and torch_npu.get_npu_format(x) == 29
    z = torch.zeros(2, 3, 4, 5, device=NPU)
    assert torch_npu.get_npu_format(torch_npu.npu_format_cast_(z, x)) == 29  # the format of a tensor
    (xg,) = leaves(x.cpu())
    torch_npu.npu_format_cast(xg, 2).sum().backward()
    close(xg.grad, torch.ones(2, 3, 4, 5), atol=0, rtol=0)


def test_format_follows_shallow_copies_and_serialization(tmp_path):
    w = torch_npu.npu_format_cast(torch.randn(8, 8, device=NPU), 29)
    layer = torch.nn.Linear(8, 8).npu()
    layer.weight.data = w  # the model-zoo way to cast a weight
    assert torch_npu.get_npu_format(layer.weight) == 29
    torch.save({"w": layer.weight.detach()}, tmp_path / "w.pt")
    loaded = torch.load(tmp_path / "w.pt")["w"]
    assert torch_npu.get_npu_format(loaded) == 29 and torch.equal(loaded.cpu(), w.cpu())
    assert torch._utils.get_tensor_metadata(w) == {"npu_format_29": True}
    fresh = torch.randn(8, 8, device=NPU)
    torch._utils.set_tensor_metadata(fresh, {"npu_format_29": True})
    assert torch_npu.get_npu_format(fresh) == 29


def test_format_cast_errors():
    with pytest.raises(ValueError, match="77 is not an aclFormat"):
        torch_npu.npu_format_cast(torch.ones(3, device=NPU), 77)
    with pytest.raises(ValueError, match=r"FRACTAL_NZ \(29\) describes tensors of at least 2 dimensions"):
        torch_npu.npu_format_cast(torch.ones(3, device=NPU), 29)
    with pytest.raises(ValueError, match="NC1HWC0 .* 4-dimensional tensors, but the tensor has 2"):
        torch_npu.npu_format_cast_(torch.ones(3, 4, device=NPU), 3)
    with pytest.raises(RuntimeError, match="get_npu_format expects an npu tensor"):
        torch_npu.get_npu_format(torch.ones(3))


# -- npu_fusion_attention ------------------------------------------------------------------


def to_bnsd(t, layout, heads):
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.transpose(1, 2)
    if layout == "BSH":
        b, s, h = t.shape
        return t.reshape(b, s, heads, h // heads).transpose(1, 2)
    s, b, h = t.shape  # SBH
    return t.reshape(s, b, heads, h // heads).permute(1, 2, 0, 3)


def from_bnsd(t, layout):
    b, n, s, d = t.shape
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.transpose(1, 2)
    if layout == "BSH":
        return t.transpose(1, 2).reshape(b, s, n * d)
    return t.permute(2, 0, 1, 3).reshape(s, b, n * d)


def make_qkv(layout, b=2, n=4, nkv=4, sq=5, skv=7, d=8, dv=8, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, n, sq, d, generator=g)
    k = torch.randn(b, nkv, skv, d, generator=g)
    v = torch.randn(b, nkv, skv, dv, generator=g)
    return [from_bnsd(t, layout).contiguous().to(dtype) for t in (q, k, v)]


def ref_attention(q, k, v, pse=None, mask=None, scale=1.0, keep=None, keep_prob=1.0):
    """Naive attention on [B, N, S, D] tensors; returns (out, row max, row sum)."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    s = torch.einsum("bnqd,bnkd->bnqk", q, k)
    if pse is not None:
        s = s + pse
    s = s * scale
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    if keep is not None:
        p = p * keep / keep_prob
    out = torch.einsum("bnqk,bnkd->bnqd", p, v)
    row_max = s.amax(-1)
    return out, row_max, torch.exp(s - row_max.unsqueeze(-1)).sum(-1)


def run_and_compare(layout, n=4, nkv=4, sq=5, skv=7, d=8, dv=8, pse_shape=None,
                    mask_cpu=None, mask_arg=None, scale=0.35, atol=1e-4, **kwargs):
    """Runs npu_fusion_attention on npu and the reference on the CPU; checks
    the outputs, statistics and gradients. ``mask_cpu``: the full boolean
    mask the reference applies; ``mask_arg``: the atten_mask argument."""
    q, k, v = make_qkv(layout, n=n, nkv=nkv, sq=sq, skv=skv, d=d, dv=dv)
    g = torch.Generator().manual_seed(7)
    pse = torch.randn(pse_shape, generator=g) if pse_shape else None
    qn, kn, vn = leaves(q, k, v)
    pn = leaves(pse)[0] if pse is not None else None
    out, smax, ssum, sout, seed, offset, numels = torch_npu.npu_fusion_attention(
        qn, kn, vn, n, layout, pse=pn,
        atten_mask=None if mask_arg is None else mask_arg.to(NPU),
        scale=scale, **kwargs,
    )
    assert out.device.type == "npu" and out.dtype == q.dtype
    assert smax.shape == (2, n, sq, 8) and smax.dtype == torch.float32
    assert ssum.shape == (2, n, sq, 8) and sout.numel() == 0
    assert (seed, offset, numels) == (0, 0, 2 * n * sq * skv)

    qr, kr, vr = ref_leaves(q, k, v)
    pr = ref_leaves(pse)[0] if pse is not None else None
    ref, ref_max, ref_sum = ref_attention(
        to_bnsd(qr, layout, n), to_bnsd(kr, layout, nkv), to_bnsd(vr, layout, nkv),
        pr, mask_cpu, scale,
    )
    ref = from_bnsd(ref, layout)
    assert out.shape == ref.shape
    close(out, ref, atol=atol, rtol=atol)
    close(smax, ref_max.unsqueeze(-1).expand(-1, -1, -1, 8), atol=atol, rtol=atol)
    close(ssum, ref_sum.unsqueeze(-1).expand(-1, -1, -1, 8), atol=atol, rtol=atol)

    w = torch.randn(ref.shape, generator=g)
    (out * w.to(NPU)).sum().backward()
    (ref * w).sum().backward()
    close(qn.grad, qr.grad, atol=atol, rtol=atol)
    close(kn.grad, kr.grad, atol=atol, rtol=atol)
    close(vn.grad, vr.grad, atol=atol, rtol=atol)
    if pse is not None:
        close(pn.grad, pr.grad, atol=atol, rtol=atol)
    return out


@pytest.mark.parametrize("layout", ["BSH", "SBH", "BSND", "BNSD"])
def test_fusion_attention_layouts(layout):
    run_and_compare(layout)


@pytest.mark.parametrize("layout", ["BSH", "BNSD"])
def test_fusion_attention_gqa_and_value_dim(layout):
    run_and_compare(layout, n=4, nkv=2, dv=6 if layout == "BNSD" else 8)
    run_and_compare(layout, n=4, nkv=1)


@pytest.mark.parametrize("mask_shape", [(5, 7), (2, 1, 5, 7), (2, 4, 5, 7)])
@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.uint8])
def test_fusion_attention_atten_mask(mask_shape, mask_dtype):
    g = torch.Generator().manual_seed(4)
    mask = torch.rand(mask_shape, generator=g) < 0.3
    mask[..., 0] = False  # every query sees at least one key
    run_and_compare("BSH", mask_cpu=mask, mask_arg=mask.to(mask_dtype))


@pytest.mark.parametrize("pse_shape", [(2, 4, 5, 7), (1, 4, 5, 7), (2, 4, 1, 7)])
def test_fusion_attention_pse(pse_shape):
    run_and_compare("BNSD", pse_shape=pse_shape)


def positions(sq, skv):
    return torch.arange(sq).unsqueeze(-1), torch.arange(skv)


@pytest.mark.parametrize("sq,skv", [(5, 7), (6, 6)])
def test_fusion_attention_sparse_modes(sq, skv):
    i, j = positions(sq, skv)
    # 2: causal aligned top-left; 3: aligned bottom-right.
    compressed = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)
    run_and_compare("BNSD", sq=sq, skv=skv, mask_cpu=j > i, mask_arg=compressed, sparse_mode=2)
    run_and_compare("BNSD", sq=sq, skv=skv, mask_cpu=j > i + (skv - sq),
                    mask_arg=compressed, sparse_mode=3)
    # 4: band around the bottom-right diagonal.
    band = (j - i - (skv - sq) > 1) | (j - i - (skv - sq) < -2)
    run_and_compare("BNSD", sq=sq, skv=skv, mask_cpu=band, sparse_mode=4,
                    pre_tockens=2, next_tockens=1)
    # 0: atten_mask combined with the top-left band of pre/next_tockens.
    user = torch.zeros(sq, skv, dtype=torch.bool)
    user[:, -1] = True
    band0 = (j - i > 1) | (i - j > 2)
    run_and_compare("BNSD", sq=sq, skv=skv, mask_cpu=user | band0, mask_arg=user,
                    pre_tockens=2, next_tockens=1)
    # 1: atten_mask only, pre/next_tockens ignored.
    run_and_compare("BNSD", sq=sq, skv=skv, mask_cpu=user, mask_arg=user, sparse_mode=1,
                    pre_tockens=0, next_tockens=0)


def test_fusion_attention_prefix_mode():
    sq, skv = 5, 7
    i, j = positions(sq, skv)
    prefix = [3, 1]
    mask = torch.stack([(j > i + skv - sq) & (j >= p) for p in prefix]).unsqueeze(1)
    run_and_compare("BNSD", sq=sq, skv=skv, mask_cpu=mask, mask_arg=mask, sparse_mode=5,
                    prefix=prefix)


def test_fusion_attention_fully_masked_rows_give_zero():
    q, k, v = make_qkv("BNSD")
    mask = torch.zeros(5, 7, dtype=torch.bool)
    mask[1] = True
    qn, kn, vn = leaves(q, k, v)
    out = torch_npu.npu_fusion_attention(qn, kn, vn, 4, "BNSD", atten_mask=mask.to(NPU))[0]
    assert torch.all(out[:, :, 1].cpu() == 0)
    out.sum().backward()
    for t in (qn, kn, vn):
        assert torch.isfinite(t.grad.cpu()).all()
    assert torch.all(qn.grad[:, :, 1].cpu() == 0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fusion_attention_half(dtype):
    q, k, v = make_qkv("BSND", dtype=dtype)
    qn, kn, vn = leaves(q, k, v)
    out, smax, _, _, _, _, _ = torch_npu.npu_fusion_attention(qn, kn, vn, 4, "BSND", scale=0.3)
    assert out.dtype == dtype and smax.dtype == torch.float32
    ref = ref_attention(*(to_bnsd(t.double(), "BSND", 4) for t in (q, k, v)), scale=0.3)[0]
    close(out, from_bnsd(ref, "BSND"), atol=2e-2, rtol=2e-2)
    out.float().sum().backward()
    assert qn.grad.dtype == dtype and torch.isfinite(qn.grad.float().cpu()).all()


def test_fusion_attention_tnd():
    g = torch.Generator().manual_seed(5)
    n, d = 2, 8
    q_lens, kv_lens = [3, 1, 4], [3, 5, 4]
    q = torch.randn(sum(q_lens), n, d, generator=g)
    k = torch.randn(sum(kv_lens), n, d, generator=g)
    v = torch.randn(sum(kv_lens), n, d, generator=g)
    cum_q = [sum(q_lens[: i + 1]) for i in range(3)]
    cum_kv = [sum(kv_lens[: i + 1]) for i in range(3)]
    qn, kn, vn = leaves(q, k, v)
    out, smax, ssum, _, _, _, numels = torch_npu.npu_fusion_attention(
        qn, kn, vn, n, "TND", scale=0.5, actual_seq_qlen=cum_q, actual_seq_kvlen=cum_kv,
        sparse_mode=3, atten_mask=torch.ones(2048, 2048, dtype=torch.bool, device=NPU).triu(1),
    )
    assert out.shape == q.shape and smax.shape == (sum(q_lens), n, 8)
    assert numels == n * sum(a * b for a, b in zip(q_lens, kv_lens))
    qr, kr, vr = ref_leaves(q, k, v)
    refs, qs, ks = [], 0, 0
    for sq, skv in zip(q_lens, kv_lens):
        i, j = positions(sq, skv)
        block = [t.permute(1, 0, 2).unsqueeze(0) for t in (qr[qs:qs + sq], kr[ks:ks + skv], vr[ks:ks + skv])]
        o, _, _ = ref_attention(*block, mask=j > i + skv - sq, scale=0.5)
        refs.append(o[0].permute(1, 0, 2))
        qs, ks = qs + sq, ks + skv
    ref = torch.cat(refs)
    close(out, ref)
    w = torch.randn(ref.shape, generator=g)
    (out * w.to(NPU)).sum().backward()
    (ref * w).sum().backward()
    for a, b in ((qn, qr), (kn, kr), (vn, vr)):
        close(a.grad, b.grad)


def test_fusion_attention_grad_op_matches_autograd():
    q, k, v = make_qkv("BSH")
    g = torch.Generator().manual_seed(8)
    pse = torch.randn(1, 4, 5, 7, generator=g)
    qn, kn, vn, pn = leaves(q, k, v, pse)
    out, smax, ssum, sout, seed, offset, numels = torch_npu.npu_fusion_attention(
        qn, kn, vn, 4, "BSH", pse=pn, scale=0.25
    )
    dy = torch.randn(out.shape, generator=g).to(NPU)
    out.backward(dy)
    with_stats = torch_npu.npu_fusion_attention_grad(
        qn.detach(), kn.detach(), vn.detach(), dy, 4, "BSH", pse=pn.detach(),
        softmax_max=smax, softmax_sum=ssum, softmax_in=sout, attention_in=out.detach(),
        scale_value=0.25, seed=seed, offset=offset, numels=numels,
    )
    recomputed = torch.ops.npu.npu_fusion_attention_grad(
        qn.detach(), kn.detach(), vn.detach(), dy, 4, "BSH", pse=pn.detach(), scale_value=0.25,
    )
    for grads in (with_stats, recomputed):
        for got, leaf in zip(grads, (qn, kn, vn, pn)):
            assert got.shape == leaf.shape
            close(got, leaf.grad.cpu(), atol=1e-5, rtol=1e-5)
    no_pse = torch_npu.npu_fusion_attention_grad(qn.detach(), kn.detach(), vn.detach(), dy, 4, "BSH")
    assert no_pse[3].numel() == 0


def test_fusion_attention_dropout():
    from torch_npu.ops.custom import dropout_keep_mask

    keep_prob = 0.7
    q, k, v = make_qkv("BNSD", sq=16, skv=16)
    qn, kn, vn = leaves(q, k, v)
    torch.npu.manual_seed(1234)
    out, _, _, _, seed, offset, numels = torch_npu.npu_fusion_attention(
        qn, kn, vn, 4, "BNSD", scale=0.3, keep_prob=keep_prob
    )
    assert numels == 2 * 4 * 16 * 16
    keep = dropout_keep_mask(seed, offset, numels, keep_prob, NPU).cpu().view(2, 4, 16, 16)
    assert 0.6 < keep.float().mean().item() < 0.8
    qr, kr, vr = ref_leaves(q, k, v)
    ref = ref_attention(qr, kr, vr, scale=0.3, keep=keep, keep_prob=keep_prob)[0]
    close(out, ref)
    w = torch.randn(ref.shape)
    (out * w.to(NPU)).sum().backward()
    (ref * w).sum().backward()
    for a, b in ((qn, qr), (kn, kr), (vn, vr)):
        close(a.grad, b.grad)

    # The next call draws another mask; re-seeding reproduces the first.
    again = torch_npu.npu_fusion_attention(qn, kn, vn, 4, "BNSD", scale=0.3, keep_prob=keep_prob)
    assert again[5] != offset and not torch.equal(again[0].cpu(), out.cpu())
    torch.npu.manual_seed(1234)
    same = torch_npu.npu_fusion_attention(qn, kn, vn, 4, "BNSD", scale=0.3, keep_prob=keep_prob)
    assert (same[4], same[5]) == (seed, offset)
    assert torch.equal(same[0].cpu(), out.cpu())


def test_fusion_attention_errors():
    q, k, v = (t.to(NPU) for t in make_qkv("BSH"))
    with pytest.raises(ValueError, match="input_layout"):
        torch_npu.npu_fusion_attention(q, k, v, 4, "BHS")
    with pytest.raises(ValueError, match="keep_prob"):
        torch_npu.npu_fusion_attention(q, k, v, 4, "BSH", keep_prob=0.0)
    with pytest.raises(ValueError, match="head_num"):
        torch_npu.npu_fusion_attention(q, k, v, 3, "BSH")
    with pytest.raises(NotImplementedError):
        torch_npu.npu_fusion_attention(q, k, v, 4, "BSH", sparse_mode=7)
    with pytest.raises(ValueError, match="actual_seq_qlen"):
        torch_npu.npu_fusion_attention(q.view(10, 4, 8), k.view(14, 4, 8), v.view(14, 4, 8), 4, "TND")
    with pytest.raises(ValueError, match="cumulative"):
        torch_npu.npu_fusion_attention(
            q.view(10, 4, 8), k.view(14, 4, 8), v.view(14, 4, 8), 4, "TND",
            actual_seq_qlen=[5, 3], actual_seq_kvlen=[7, 14],
        )


# -- gradcheck ------------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_gradcheck(device):
    """Finite differences in float64 (first and, for the element-wise ops,
    second order: their backwards are differentiable)."""
    from torch.autograd import gradcheck, gradgradcheck

    g = torch.Generator().manual_seed(11)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(device).requires_grad_()

    x, gamma = r(3, 6), r(6)
    rms = lambda x, gamma: torch_npu.npu_rms_norm(x, gamma)  # noqa: E731
    assert gradcheck(rms, (x, gamma)) and gradgradcheck(rms, (x, gamma))
    xr, r1, r2 = r(2, 2, 3, 4), r(1, 2, 1, 4), r(1, 2, 1, 4)
    for mode in ("half", "interleave"):
        rot = lambda a, b, c: torch_npu.npu_rotary_mul(a, b, c, mode)  # noqa: E731
        assert gradcheck(rot, (xr, r1, r2)) and gradgradcheck(rot, (xr, r1, r2))
    xs = r(4, 3)
    swi = lambda a: torch_npu.npu_swiglu(a, 0)  # noqa: E731
    assert gradcheck(swi, (xs,)) and gradgradcheck(swi, (xs,))
    q, k, v, pse = r(1, 3, 8), r(1, 5, 4), r(1, 5, 4), r(1, 2, 3, 5)
    mask = torch.zeros(3, 5, dtype=torch.bool, device=device)
    mask[0, 1] = True

    def fa(q, k, v, pse):
        return torch_npu.npu_fusion_attention(
            q, k, v, 2, "BSH", pse=pse, atten_mask=mask, scale=0.4
        )[0]

    assert gradcheck(fa, (q, k, v, pse))


# -- opcheck ------------------------------------------------------------------------------


def opcheck_samples():
    g = torch.Generator().manual_seed(9)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    q, k, v = make_qkv("BSH", sq=4, skv=6)
    mask = torch.zeros(4, 6, dtype=torch.bool)
    mask[:, -1] = True
    fa_out = torch_npu.npu_fusion_attention(q, k, v, 4, "BSH", atten_mask=mask, scale=0.3)
    return [
        ("npu_rms_norm", (r(3, 8), r(8)), {"epsilon": 1e-5}),
        ("npu_rotary_mul", (r(1, 3, 2, 8), r(1, 3, 1, 8), r(1, 3, 1, 8)), {"rotary_mode": "interleave"}),
        ("npu_swiglu", (r(4, 6),), {"dim": 0}),
        ("npu_dtype_cast", (r(3, 4), torch.float16), {}),
        ("npu_format_cast", (r(3, 4), 29), {}),
        ("npu_fusion_attention", (q, k, v, 4, "BSH"), {"atten_mask": mask, "scale": 0.3}),
        ("npu_fusion_attention", make_qkv("BNSD", nkv=2) + [4, "BNSD"],
         {"pse": r(1, 4, 5, 7), "sparse_mode": 3}),
        ("npu_fusion_attention_grad", (q, k, v, r(*fa_out[0].shape), 4, "BSH"),
         {"atten_mask": mask, "softmax_max": fa_out[1], "softmax_sum": fa_out[2],
          "attention_in": fa_out[0], "scale_value": 0.3}),
    ]


def _on(value, device, requires_grad):
    if isinstance(value, torch.Tensor):
        t = value.detach().to(device)
        return t.requires_grad_() if requires_grad and t.is_floating_point() else t
    if isinstance(value, dict):
        return {k: _on(x, device, requires_grad) for k, x in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_on(x, device, requires_grad) for x in value)
    return value


@pytest.mark.parametrize("index", range(8))
def test_opcheck_cpu(index):
    name, args, kwargs = opcheck_samples()[index]
    op = getattr(torch.ops.npu, name).default
    grad = name != "npu_fusion_attention_grad"  # it has no autograd (as on Ascend)
    torch.library.opcheck(op, _on(args, "cpu", grad), _on(kwargs, "cpu", grad))


@pytest.mark.parametrize("index", range(8))
def test_opcheck_npu(index):
    name, args, kwargs = opcheck_samples()[index]
    op = getattr(torch.ops.npu, name).default
    grad = name != "npu_fusion_attention_grad"
    # torch's autograd_registration check supports only CPU/CUDA/XPU tensors
    # (it runs above on the CPU; the registration is device independent).
    torch.library.opcheck(
        op, _on(args, NPU, grad), _on(kwargs, NPU, grad),
        test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"),
    )


# -- torch.compile --------------------------------------------------------------------------


def block(x, gamma, cos, sin, w_qkv, w_up):
    h, _ = torch_npu.npu_rms_norm(x, gamma)
    b, s, _ = h.shape
    q, k, v = (h @ w_qkv).chunk(3, dim=-1)
    q = torch_npu.npu_rotary_mul(q.view(b, s, 2, 8), cos, sin).view(b, s, 16)
    k = torch_npu.npu_rotary_mul(k.view(b, s, 2, 8), cos, sin).view(b, s, 16)
    attn = torch_npu.npu_fusion_attention(
        q, k, v, 2, "BSH", scale=1 / math.sqrt(8), sparse_mode=2,
        atten_mask=torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1),
    )[0]
    y = torch_npu.npu_swiglu(attn @ torch_npu.npu_format_cast(w_up, 29))
    return torch_npu.npu_dtype_cast(y, torch.float32).sum()


def block_inputs():
    g = torch.Generator().manual_seed(10)
    return leaves(
        torch.randn(2, 6, 16, generator=g), torch.randn(16, generator=g),
        torch.randn(1, 6, 1, 8, generator=g), torch.randn(1, 6, 1, 8, generator=g),
        torch.randn(16, 48, generator=g) / 4, torch.randn(16, 32, generator=g) / 4,
    )


@pytest.mark.parametrize("backend,dynamic", [("eager", False), ("aot_eager", False), ("aot_eager", True)])
def test_compile(backend, dynamic):
    """One graph (fullgraph=True) through every op, forward and backward."""
    torch._dynamo.reset()
    eager_in, compiled_in = block_inputs(), block_inputs()
    expected = block(*eager_in)
    expected.backward()
    compiled = torch.compile(block, backend=backend, fullgraph=True, dynamic=dynamic)
    got = compiled(*compiled_in)
    got.backward()
    close(got, expected.detach().cpu(), atol=1e-5, rtol=1e-5)
    for a, b in zip(compiled_in, eager_in):
        close(a.grad, b.grad.cpu(), atol=1e-5, rtol=1e-5)


def test_compile_with_dropout():
    """keep_prob < 1: seed/offset are data-dependent ints. By default dynamo
    breaks the graph at the op (it runs eagerly); with
    capture_dynamic_output_shape_ops they flow through the graph as unbacked
    SymInts into npu_fusion_attention_grad. Both give the eager results."""
    from torch_npu.ops.custom import dropout_keep_mask

    def f(q, k, v):
        out, _, _, _, seed, offset, numels = torch_npu.npu_fusion_attention(
            q, k, v, 4, "BNSD", scale=0.3, keep_prob=0.75
        )
        return out, seed, offset, numels

    q, k, v = make_qkv("BNSD")
    for capture in (False, True):
        torch._dynamo.reset()
        qn, kn, vn = leaves(q, k, v)
        with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=capture):
            out, seed, offset, numels = torch.compile(f, backend="aot_eager")(qn, kn, vn)
            (out * 2).sum().backward()
        keep = dropout_keep_mask(int(seed), int(offset), int(numels), 0.75, NPU).cpu()
        qr, kr, vr = ref_leaves(q, k, v)
        ref = ref_attention(qr, kr, vr, scale=0.3, keep=keep.view(2, 4, 5, 7), keep_prob=0.75)[0]
        close(out, ref)
        (ref * 2).sum().backward()
        for a, b in ((qn, qr), (kn, kr), (vn, vr)):
            close(a.grad, b.grad)
