"""Ops the wide compiled OpInfo scan (test_compile_opinfo_full.py) found
running eagerly (class ``loud_fallback``) that now compile to MLIR kernels,
each compared with eager npu at edge values (NaN, +-inf, +-0, negative,
huge, tiny) and required to run without a fallback
(NPUKernelFallbackWarning):

- erfc, erfinv and hypot, which torch-mlir does not lower (Note [Math
  torch-mlir does not lower], _math.py);
- the spellings torch-mlir folds or lowers wrongly (Note [Ops torch-mlir
  folds or lowers wrongly], _program.py): ``eq`` (amax's and amin's
  backward), bool constants kept in bytes (isfinite, isreal, isposinf,
  isneginf of integers), 8-bit floor division, as_strided_copy;
- copysign and signbit, which torch-mlir spells with a ``view.dtype`` it
  does not lower (Note [Bitcasts torch-mlir does not lower], _bitcasts.py);
- cross-entropy with ignored labels (and label smoothing, weights, every
  reduction), forward and backward, and cumprod's backward, whose bool
  masks are read through reshapes (Note [Reshaped views of a bool buffer],
  _byte_bools.py), in half precision too (Note [Half-precision reductions
  accumulate in float32], _half_sums.py);
- roll (fmod of integers by a number), and paddings that crop (the
  backward of F.pad, local_response_norm and F.unfold) or pad bools (Note
  [Ops torch-mlir folds or lowers wrongly]).

Inputs are made inside each test: npu tensors made at import stay
allocated for the whole session.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from torch_npu.graph.compile import _mlir
from _mlir_only import compiled_as_mlir
from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")

_FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def _edges(dtype: torch.dtype) -> torch.Tensor:
    magnitudes = torch.logspace(-30, 30, 61, dtype=torch.float64)
    values = torch.cat([magnitudes, -magnitudes, torch.linspace(-12, 12, 481, dtype=torch.float64),
                        torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 3e38, -3e38, 1e-45])])
    return values.to(dtype).to("npu")


@needs_mlir
@pytest.mark.parametrize("dtype", _FLOATS, ids=str)
def test_erfc_compiles_and_matches_eager(dtype):
    x = _edges(dtype)
    actual = compiled_as_mlir(torch.erfc, x)
    torch.testing.assert_close(actual, torch.erfc(x), equal_nan=True)


@needs_mlir
@pytest.mark.parametrize("dtype", _FLOATS, ids=str)
def test_erfinv_compiles_and_matches_eager(dtype):
    # Its domain is [-1, 1]: dense there, and closer and closer to +-1,
    # where it grows without bound; outside it NaN, at +-1 +-inf.
    ramp = torch.linspace(-1, 1, 4001, dtype=torch.float64)
    near_one = 1 - torch.logspace(-8, -1, 141, dtype=torch.float64)
    x = torch.cat([ramp, near_one, -near_one, torch.logspace(-40, 0, 161, dtype=torch.float64)]).to(dtype)
    x = torch.cat([x, _edges(dtype).cpu()]).to("npu")
    torch.testing.assert_close(compiled_as_mlir(torch.erfinv, x), torch.erfinv(x), equal_nan=True)


@needs_mlir
def test_erfc_is_accurate_relative_to_its_value():
    # 1 - erf(x) would be 0 or an ulp of 1 where erfc(x) is tiny;
    # assert_close's atol hides that, so this compares relative error only.
    x = torch.linspace(-3, 9, 2001, device="npu")
    actual = compiled_as_mlir(torch.erfc, x)
    torch.testing.assert_close(actual, torch.erfc(x), rtol=2e-6, atol=0)


@needs_mlir
@pytest.mark.parametrize("dtype", _FLOATS, ids=str)
def test_hypot_compiles_and_matches_eager(dtype):
    # Every pair of edge values, both ways round: inf wins over NaN, NaN
    # over any number, no overflow at 3e38 nor underflow at 1e-30.
    edges = torch.tensor([0.0, -0.0, 1.0, -2.5, 1e-30, 1e30, 3e38, -3e38, math.inf, -math.inf, math.nan],
                         dtype=torch.float64)
    a, b = torch.meshgrid(edges, edges, indexing="ij")
    a, b = a.to(dtype).to("npu"), b.to(dtype).to("npu")
    actual = compiled_as_mlir(torch.hypot, a, b)
    torch.testing.assert_close(actual, torch.hypot(a, b), equal_nan=True)
    x, y = _edges(dtype), _edges(dtype).flip(0)
    torch.testing.assert_close(compiled_as_mlir(torch.hypot, x, y), torch.hypot(x, y), equal_nan=True)


@needs_mlir
@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("shape", [(), (5,), (3, 4)], ids=str)
def test_amax_amin_gradients_compile_and_keep_nan(op, shape):
    # The backward compares the input with its amax; of a 0-d tensor that
    # is eq(x, x), which torch-mlir folded to True (also at NaN).
    values = torch.tensor([1.0, math.nan, -math.inf, 2.0, 2.0, math.inf, -0.0, 0.0, -3.0, 7.0, 7.0, 1e30])
    x = values[: math.prod(shape)].reshape(shape).to("npu").requires_grad_()

    def gradient(x):
        reduced = getattr(x, op)()
        return torch.autograd.grad(reduced * 3, [x])[0]

    actual = compiled_as_mlir(gradient, x)
    torch.testing.assert_close(actual, gradient(x), equal_nan=True)


@needs_mlir
def test_eq_of_a_value_with_itself_is_false_at_nan():
    x = torch.tensor([1.0, math.nan, -math.inf, math.inf, -0.0], device="npu")
    actual = compiled_as_mlir(lambda t: (t * 1 == t, t.amax() == t[1]), x)
    torch.testing.assert_close(actual, (x * 1 == x, x.amax() == x[1]))


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int64], ids=str)
@pytest.mark.parametrize("op", ["isfinite", "isreal", "isposinf", "isneginf", "isinf", "isnan"])
def test_float_predicates_of_integers_compile(dtype, op):
    # Of integers they are constants, which torch-mlir folded into an int8
    # literal it then rejected as the uint8 bytes of the bool result.
    info = torch.iinfo(dtype)
    x = torch.tensor([[info.min, -1 if info.min < 0 else 0, 0], [1, 7, info.max]], dtype=dtype, device="npu")
    fn = getattr(torch, op)
    torch.testing.assert_close(compiled_as_mlir(fn, x), fn(x))


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8], ids=str)
def test_floor_division_of_bytes_compiles(dtype):
    info = torch.iinfo(dtype)
    values = torch.tensor(sorted({info.min, info.min + 1, -7, -1, 0, 1, 2, 7, info.max - 1, info.max}
                                 & set(range(info.min, info.max + 1))), dtype=dtype)
    a, b = torch.meshgrid(values, values[values != 0], indexing="ij")
    a, b = a.to("npu"), b.to("npu")
    torch.testing.assert_close(compiled_as_mlir(torch.floor_divide, a, b), torch.floor_divide(a, b))
    torch.testing.assert_close(compiled_as_mlir(lambda t: torch.div(t, 3, rounding_mode="floor"), a),
                               torch.div(a, 3, rounding_mode="floor"))


@needs_mlir
def test_as_strided_copy_compiles():
    x = torch.tensor([1.0, math.nan, -math.inf, math.inf, -0.0, 3e38, -5.0, 1e-30, 2.0, 8.0, 9.0, 10.0],
                     device="npu")

    def overlapping(t):
        return torch.as_strided_copy(t * 2, (3, 4), (2, 1), 1)

    torch.testing.assert_close(compiled_as_mlir(overlapping, x), overlapping(x), equal_nan=True)

    def transposed(t):
        return torch.as_strided_copy(t.reshape(3, 4) - 1, (4, 3), (1, 4))

    torch.testing.assert_close(compiled_as_mlir(transposed, x), transposed(x), equal_nan=True)


@needs_mlir
@pytest.mark.parametrize("dtype", [*_FLOATS, torch.float64], ids=str)
def test_copysign_and_signbit_compile_with_the_sign_of_nan_and_zero(dtype):
    # torch-mlir spells them with view.dtype, which it does not lower
    # (Note [Bitcasts torch-mlir does not lower]). inf - inf is a NaN with
    # its sign bit set on x86; -0.0 has one too.
    x = torch.tensor([1.0, -2.0, 0.0, -0.0, math.inf, -math.inf, math.nan, 3e38, 5.0, 6.0, 1e-30, -7.0],
                     dtype=dtype, device="npu")
    y = torch.tensor([-1.0, 2.0, -0.0, 0.0, -3.0, 4.0, -1.0, -0.0, math.nan, math.inf, -math.inf, 1e-30],
                     dtype=dtype, device="npu")

    def signs(a, b):
        negative_nan = (b * math.inf) - (b * math.inf)  # NaN, or -NaN, per element
        if b.dtype == torch.bfloat16:
            # Eager rounds a bfloat16 NaN it computes to +NaN (c10's
            # rounding), the kernel keeps the sign the CPU gave it: a
            # difference of the subtraction's NaN, not of copysign.
            negative_nan = b
        return (torch.copysign(a, b), torch.copysign(a, negative_nan), torch.signbit(b),
                torch.signbit(negative_nan), torch.copysign(a[0], b[1]))

    torch.testing.assert_close(compiled_as_mlir(signs, x, y), signs(x, y), equal_nan=True)
    # compared bit for bit: assert_close does not see the sign of a NaN
    actual, expected = compiled_as_mlir(signs, x, y)[1], signs(x, y)[1]
    assert torch.equal(torch.signbit(actual), torch.signbit(expected))


def _compiled_loss_and_gradient(fn, x, *rest):
    """``fn(x, *rest)`` compiled and its gradient by x through the compiled
    backward, as a training step takes them; fails if a kernel of either
    fell back to eager."""
    torch._dynamo.reset()
    leaf = x.detach().requires_grad_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss = torch.compile(fn, dynamic=False)(leaf, *rest)
        weights = _position_weights(loss)
        (gradient,) = torch.autograd.grad((loss * weights).sum(), [leaf])
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, NPUKernelFallbackWarning)]
    assert not fallbacks, fallbacks
    return loss, gradient


def _eager_loss_and_gradient(fn, x, *rest):
    leaf = x.detach().requires_grad_()
    loss = fn(leaf, *rest)
    (gradient,) = torch.autograd.grad((loss * _position_weights(loss)).sum(), [leaf])
    return loss, gradient


def _position_weights(loss: torch.Tensor) -> torch.Tensor:
    # A per-sample loss weighted by position: a wrong row of the backward shows.
    return (torch.arange(loss.numel(), device=loss.device).reshape(loss.shape) % 3 + 1).to(loss.dtype)


def _logits_and_labels(rows: int, classes: int, dtype: torch.dtype = torch.float32):
    torch.manual_seed(0)
    logits = (torch.randn(rows, classes, dtype=torch.float64) * 3).to(dtype).to("npu")
    labels = torch.randint(0, classes, (rows,))
    labels[::3] = -100  # ignored, as padding tokens of a batch are
    return logits, labels.to("npu")


_CROSS_ENTROPY_OPTIONS = {
    "mean": {}, "sum": {"reduction": "sum"}, "none": {"reduction": "none"},
    "label_smoothing": {"label_smoothing": 0.1}, "label_smoothing_none": {"reduction": "none", "label_smoothing": 0.2},
}


@needs_mlir
@pytest.mark.parametrize("option", list(_CROSS_ENTROPY_OPTIONS))
@pytest.mark.parametrize("shape", [(8, 10), (64, 96), (300, 33)], ids=str)
def test_cross_entropy_with_ignored_labels_compiles(option, shape):
    # The mask of kept labels is a bool buffer read through a reshape
    # (Note [Reshaped views of a bool buffer]); 96 classes vectorise.
    logits, labels = _logits_and_labels(*shape)
    kwargs = _CROSS_ENTROPY_OPTIONS[option]

    def loss(x, y):
        return F.cross_entropy(x, y, **kwargs)

    actual = _compiled_loss_and_gradient(loss, logits, labels)
    torch.testing.assert_close(actual, _eager_loss_and_gradient(loss, logits, labels))


@needs_mlir
def test_cross_entropy_edge_cases_compile():
    logits, labels = _logits_and_labels(64, 10)
    weight = torch.linspace(0.5, 2.0, 10, device="npu")
    edges = logits.clone()
    edges[1, 2], edges[3, 4], edges[7, 1] = math.inf, -math.inf, math.nan
    edges[5, :] = -math.inf
    spatial = torch.randn(4, 5, 6, 7, device="npu")
    spatial_labels = torch.randint(0, 5, (4, 6, 7), device="npu")
    spatial_labels[0, :, :3] = -100
    cases = [
        (lambda x, y: F.cross_entropy(x, y, ignore_index=2), logits, labels.clamp_min(2)),
        (lambda x, y, w: F.cross_entropy(x, y, weight=w), logits, labels, weight),
        (lambda x, y, w: F.cross_entropy(x, y, weight=w, label_smoothing=0.1), logits, labels, weight),
        (lambda x, y: F.cross_entropy(x, y), logits, torch.full_like(labels, -100)),  # 0 / 0: NaN
        (lambda x, y: F.cross_entropy(x, y, reduction="none"), edges, labels),
        (lambda x, y: F.cross_entropy(x, y, label_smoothing=0.3), spatial, spatial_labels),
        (lambda x, y: F.nll_loss(F.log_softmax(x, 1), y), logits, labels),
    ]
    for fn, *args in cases:
        actual = _compiled_loss_and_gradient(fn, *args)
        torch.testing.assert_close(actual, _eager_loss_and_gradient(fn, *args), equal_nan=True)


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("option", ["mean", "sum", "label_smoothing_none"])
@pytest.mark.parametrize("shape", [(8, 10), (300, 33)], ids=str)
def test_half_precision_cross_entropy_compiles(dtype, option, shape):
    # Compiled, the loss and its gradient are computed in float32 and
    # rounded once (as Inductor does everywhere), where eager rounds each
    # step's result to the dtype: they may differ by a rounding of the
    # largest value, not more, and the compiled ones are no further from
    # float64's than eager's are, but for that rounding.
    logits, labels = _logits_and_labels(*shape, dtype)
    kwargs = _CROSS_ENTROPY_OPTIONS[option]

    def loss(x, y):
        return F.cross_entropy(x, y, **kwargs)

    actual = _compiled_loss_and_gradient(loss, logits, labels)
    expected = _eager_loss_and_gradient(loss, logits, labels)
    exact = _eager_loss_and_gradient(loss, logits.double(), labels)
    for got, want, reference in zip(actual, expected, exact):
        rounding = 2 * torch.finfo(dtype).eps * want.abs().max().item()
        torch.testing.assert_close(got, want, atol=rounding, rtol=0)
        assert (got.double() - reference).abs().max() <= (want.double() - reference).abs().max() + rounding


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_sums_accumulate_in_float32(dtype):
    # Note [Half-precision reductions accumulate in float32]: a bfloat16 accumulator gave
    # 1376 for the 1432 eager gives (which accumulates in float32).
    torch.manual_seed(0)
    x = (torch.rand(300, dtype=torch.float64) * 10).to(dtype).to("npu")
    rows = x.reshape(10, 30)

    def sums(t, r):
        return (t.sum(), (t * 2).mean(), torch.where(t > 1, t, 0).sum(), r.sum(1), r.sum(0, keepdim=True),
                r.mean(1), t[0].sum())

    torch.testing.assert_close(compiled_as_mlir(sums, x, rows), sums(x, rows))


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=str)
def test_roll_compiles(dtype):
    # Inductor computes roll's source positions with fmod of an integer by
    # a number, which torch-mlir cannot legalize (Note [Ops torch-mlir
    # folds or lowers wrongly]).
    values = torch.tensor([1.0, math.nan, -math.inf, math.inf, -0.0, 3e38, -5.0, 1e-30, 2.0, 8.0, 9.0, 10.0] * 5)
    x = (values if dtype.is_floating_point else values.nan_to_num().to(torch.int64) % 7).to(dtype)
    x = x.reshape(6, 10).to("npu")

    def rolls(t):
        return (torch.roll(t, 3, 1), torch.roll(t, (1, -2), (0, 1)), torch.roll(t, 23), torch.roll(t, -13, 0),
                torch.roll(t, 7, 1)[1:])

    torch.testing.assert_close(compiled_as_mlir(rolls, x), rolls(x), equal_nan=True)


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8], ids=str)
def test_fmod_of_integers_by_a_number(dtype):
    info = torch.iinfo(dtype)
    values = {info.min, info.min + 1, -7, -1, 0, 1, 2, 7, 8, info.max - 1, info.max}
    x = torch.tensor(sorted(v for v in values if v >= info.min), dtype=dtype, device="npu")

    def remainders(t):
        return torch.fmod(t, 7), torch.fmod(t, 2), torch.fmod(t, 1)

    if dtype == torch.uint8:
        # Not rewritten (torch-mlir's remainder of uint8 is signed): it
        # may run eagerly, but must be right.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NPUKernelFallbackWarning)
            torch._dynamo.reset()
            torch.testing.assert_close(torch.compile(remainders)(x), remainders(x))
        return
    torch.testing.assert_close(compiled_as_mlir(remainders, x), remainders(x))
    torch.testing.assert_close(compiled_as_mlir(lambda t: torch.fmod(t, -3), x), torch.fmod(x, -3))


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool], ids=str)
def test_constant_pad_with_negative_pads_compiles(dtype):
    # A negative pad crops; torch-mlir's lowering failed on its negative
    # offset (Note [Ops torch-mlir folds or lowers wrongly]).
    values = torch.tensor([1.0, math.nan, -math.inf, math.inf, -0.0, 3e38, -5.0, 1e-30, 2.0, 8.0, 9.0, 10.0] * 5)
    x = (values if dtype.is_floating_point else values.nan_to_num().to(torch.int64) % 7).to(dtype)
    x = x.reshape(3, 4, 5).to("npu")
    fill = True if dtype == torch.bool else 2

    def pads(t):
        return (F.pad(t, (-1, 2, 1, -2), value=fill), F.pad(t, (-1, -1, -1, -1)), F.pad(t, (0, -4)),
                F.pad(t, (-2, 0, 0, 0, 1, -2), value=fill), F.pad(t, (3, -4)))

    torch.testing.assert_close(compiled_as_mlir(pads, x), pads(x), equal_nan=True)


_CROPPING_GRADIENTS = {
    # the backward of a padding crops the gradient
    "pad": (lambda x: F.pad(x, (1, 2, 3, 0), value=1.5), (4, 6)),
    "pad_3d": (lambda x: F.pad(x, (0, 1, 2, 0, 1, 1)), (2, 3, 4)),
    "local_response_norm": (lambda x: F.local_response_norm(x, 3), (2, 5, 4, 4)),
    "local_response_norm_3d": (lambda x: F.local_response_norm(x, 2, alpha=3e-5, beta=0.5, k=1.25), (1, 6, 3)),
    "unfold": (lambda x: F.unfold(x, (2, 3), padding=1, stride=2), (2, 2, 5, 6)),
    "unfold_padded": (lambda x: F.unfold(x, 2, padding=(1, 2)), (1, 3, 4, 4)),
    # its mask of zeros is a bool buffer read through a reshape
    "cumprod": (lambda x: torch.cumprod(x * (x.abs() > 0.3), 1), (8, 10)),
}


@needs_mlir
@pytest.mark.parametrize("case", list(_CROPPING_GRADIENTS))
def test_cropping_gradients_compile(case):
    fn, shape = _CROPPING_GRADIENTS[case]
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float64).to(torch.float32).to("npu")
    actual = _compiled_loss_and_gradient(fn, x)
    torch.testing.assert_close(actual, _eager_loss_and_gradient(fn, x), atol=1e-5, rtol=1e-5)


def test_kernels_compile_when_future_warnings_are_errors(tmp_path, monkeypatch):
    # torch.export warns (FutureWarning) about torch's own LeafSpec check at
    # every kernel's import; under -W error::FutureWarning every kernel fell
    # back to eager ops. A cache of its own, so the kernel is compiled here.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    x = torch.randn(3, 41, device="npu")
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", NPUKernelFallbackWarning)
        actual = torch.compile(lambda t: (t * 3.25).cos() - 0.125, dynamic=False)(x)
    torch.testing.assert_close(actual, (x * 3.25).cos() - 0.125)
