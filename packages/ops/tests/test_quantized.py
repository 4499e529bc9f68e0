"""Quantized npu tensors (csrc/QuantizedTensors.cpp, Note [Quantized npu
tensors]): made, dequantized, viewed, copied and moved as on the CPU, with
the CPU's values; the CPU's argument errors at the call; what has no npu
kernel refused at the call, saying what to do."""

from __future__ import annotations

import copy
import io
import warnings

import pytest
import torch
import torch_npu  # noqa: F401

QDTYPES = [torch.quint8, torch.qint8, torch.qint32]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized dtypes are deprecated
        yield
    torch.npu.synchronize()  # nothing queued fails later


def _same(npu_q: torch.Tensor, cpu_q: torch.Tensor) -> None:
    """The same quantized tensor: scheme, parameters, integers, values."""
    assert npu_q.device.type == "npu" and npu_q.is_quantized
    assert npu_q.dtype == cpu_q.dtype and npu_q.qscheme() == cpu_q.qscheme()
    assert npu_q.shape == cpu_q.shape
    if cpu_q.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        assert (npu_q.q_scale(), npu_q.q_zero_point()) == (cpu_q.q_scale(), cpu_q.q_zero_point())
    else:
        torch.testing.assert_close(npu_q.q_per_channel_scales().cpu(), cpu_q.q_per_channel_scales(), rtol=0, atol=0)
        torch.testing.assert_close(npu_q.q_per_channel_zero_points().cpu(), cpu_q.q_per_channel_zero_points(),
                                   rtol=0, atol=0)
        assert npu_q.q_per_channel_axis() == cpu_q.q_per_channel_axis()
    assert torch.equal(npu_q.int_repr().cpu(), cpu_q.int_repr())
    assert torch.equal(npu_q.dequantize().cpu(), cpu_q.dequantize())


@pytest.mark.parametrize("dtype", QDTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "channels_last"])
def test_quantize_per_tensor_equals_the_cpu(dtype, layout):
    x = torch.randn(2, 3, 4, 5) * 3
    if layout == "transposed":
        x = x.transpose(1, 3)
    elif layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    zero_point = 0 if dtype == torch.qint8 else 7
    cpu_q = torch.quantize_per_tensor(x, 0.02, zero_point, dtype)
    npu_q = torch.quantize_per_tensor(x.npu(), 0.02, zero_point, dtype)
    _same(npu_q, cpu_q)
    assert npu_q.stride() == cpu_q.stride()
    assert npu_q.dequantize().stride() == cpu_q.dequantize().stride()


def test_the_other_quantizing_forms_equal_the_cpu():
    x = torch.randn(4, 6)
    _same(torch.quantize_per_tensor(x.npu(), torch.tensor(0.1).npu(), torch.tensor(2).npu(), torch.quint8),
          torch.quantize_per_tensor(x, torch.tensor(0.1), torch.tensor(2), torch.quint8))
    pairs = zip(torch.quantize_per_tensor([x.npu(), 2 * x.npu()], torch.tensor([0.1, 0.2]), torch.tensor([1, 2]),
                                          torch.qint8),
                torch.quantize_per_tensor([x, 2 * x], torch.tensor([0.1, 0.2]), torch.tensor([1, 2]), torch.qint8))
    for npu_q, cpu_q in pairs:
        _same(npu_q, cpu_q)
    for reduce_range in (False, True):
        _same(torch.quantize_per_tensor_dynamic(x.npu(), torch.quint8, reduce_range),
              torch.quantize_per_tensor_dynamic(x, torch.quint8, reduce_range))
    scales, zero_points = torch.tensor([0.1, 0.05, 0.2, 0.3, 0.01, 0.5]), torch.tensor([0, 1, 2, 3, 4, 5])
    _same(torch.quantize_per_channel(x.npu(), scales.npu(), zero_points.npu(), 1, torch.quint8),
          torch.quantize_per_channel(x, scales, zero_points, 1, torch.quint8))
    _same(torch.quantize_per_channel(x.npu(), scales[:4], zero_points[:4], 0, torch.qint32),
          torch.quantize_per_channel(x, scales[:4], zero_points[:4], 0, torch.qint32))
    float_zero_points = torch.tensor([0.5, -1.0, 0.0, 2.0, 1.5, 0.25])
    _same(torch.quantize_per_channel(x.npu(), scales, float_zero_points, 1, torch.quint8),
          torch.quantize_per_channel(x, scales, float_zero_points, 1, torch.quint8))
    ints = torch.randint(0, 255, (4, 6), dtype=torch.uint8)
    _same(torch._make_per_tensor_quantized_tensor(ints.npu(), 0.5, 3),
          torch._make_per_tensor_quantized_tensor(ints, 0.5, 3))
    ints = torch.randint(-100, 100, (4, 6), dtype=torch.int8)
    _same(torch._make_per_channel_quantized_tensor(ints.npu(), scales.double(), zero_points, 1),
          torch._make_per_channel_quantized_tensor(ints, scales.double(), zero_points, 1))


def test_views_copies_and_moves_keep_the_values():
    x = torch.randn(4, 6)
    cpu_q = torch.quantize_per_tensor(x, 0.05, 4, torch.quint8)
    npu_q = cpu_q.npu()
    _same(npu_q, cpu_q)
    _same(cpu_q.to("npu:0"), cpu_q)
    assert npu_q.cpu().device.type == "cpu"
    assert torch.equal(npu_q.cpu(), cpu_q)
    for view in (lambda q: q.t(), lambda q: q[1], lambda q: q[:, 2:5], lambda q: q.view(6, 4),
                 lambda q: q.reshape(24), lambda q: q.unsqueeze(0).squeeze(0), lambda q: q.permute(1, 0),
                 lambda q: q.unfold(1, 2, 2), lambda q: q.as_strided((2, 2), (6, 1), 3)):
        _same(view(npu_q), view(cpu_q))
    _same(npu_q.clone(), cpu_q.clone())
    _same(npu_q.t().contiguous(), cpu_q.t().contiguous())
    assert torch.equal(npu_q, npu_q.clone())
    assert not torch.equal(npu_q, torch.quantize_per_tensor(x.npu(), 0.05, 5, torch.quint8))  # another zero point
    # Assignment quantizes with the destination's parameters, as on the CPU.
    npu_q[0] = 1.0
    cpu_q[0] = 1.0
    _same(npu_q, cpu_q)
    other = torch.quantize_per_tensor(torch.randn(4, 6), 0.1, 0, torch.quint8)
    npu_q.copy_(other.npu())
    cpu_q.copy_(other)
    _same(npu_q, cpu_q)
    per_channel = torch.quantize_per_channel(x, torch.rand(6) + 0.01, torch.arange(6), 1, torch.qint8)
    _same(per_channel.npu(), per_channel)
    assert torch.equal(per_channel.npu().cpu(), per_channel)


def test_serialization_and_deepcopy():
    q = torch.quantize_per_channel(torch.randn(3, 4).npu(), torch.rand(4) + 0.01, torch.arange(4), 1,
                                   torch.quint8)
    buffer = io.BytesIO()
    torch.save({"q": q}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)["q"]
    assert loaded.device == q.device and torch.equal(loaded.cpu(), q.cpu())
    deep = copy.deepcopy(q)
    assert deep.device == q.device and torch.equal(deep.cpu(), q.cpu())
    assert deep.data_ptr() != q.data_ptr()


def test_empty_and_other_devices():
    e = torch.empty(2, 3, dtype=torch.qint8, device="npu")
    assert e.is_quantized and e.device.type == "npu" and e.shape == (2, 3)
    if torch.npu.device_count() > 1:
        q = torch.quantize_per_tensor(torch.randn(5).to("npu:1"), 0.1, 0, torch.quint8)
        assert q.device == torch.device("npu:1")
        assert torch.equal(q.to("npu:0").cpu(), q.cpu())


def test_argument_errors_are_the_cpus_at_the_call():
    x = torch.randn(4, 3)
    cases = [
        lambda d: torch.quantize_per_tensor(x.to(d), 0.1, 300, torch.quint8),
        lambda d: torch.quantize_per_tensor(x.to(d), 0.1, 0, torch.float32),
        lambda d: torch.quantize_per_tensor(x.to(d).double(), 0.1, 0, torch.quint8),
        lambda d: torch.quantize_per_channel(x.to(d), torch.tensor([0.1, 0.2]), torch.tensor([0, 0]), 1,
                                             torch.quint8),
        lambda d: torch.quantize_per_channel(x.to(d), torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0, 0, 0]), 5,
                                             torch.quint8),
        lambda d: torch._make_per_tensor_quantized_tensor(torch.ones(3, device=d), 0.1, 0),
    ]
    for make in cases:
        with pytest.raises(Exception) as on_cpu:
            make("cpu")
        with pytest.raises(type(on_cpu.value)) as on_npu:
            make("npu")
        assert str(on_cpu.value).split("\n")[0] == str(on_npu.value).split("\n")[0]
    q = torch.quantize_per_tensor(x, 0.1, 0, torch.quint8)
    with pytest.raises(RuntimeError, match="Copying from quantized Tensor to non-quantized Tensor is not allowed"):
        torch.empty(4, 3, device="npu").copy_(q.npu())
    with pytest.raises(RuntimeError, match="same qscheme"):
        q.npu().copy_(torch.quantize_per_channel(x, torch.ones(3), torch.zeros(3, dtype=torch.long), 1,
                                                 torch.quint8).npu())


@pytest.mark.parametrize("dtype", QDTYPES, ids=str)
@pytest.mark.parametrize("dims", [(0,), (1,), (0, 2), (-1,), ()], ids=str)
def test_flip_moves_the_integers_and_keeps_the_quantizer_as_the_cpu(dtype, dims):
    # flip of a quantized tensor was refused on npu while the CPU flips it
    # (PyTorch's test_shape_ops test_flip quantizes its float inputs).
    x = torch.randn(3, 4, 5) * 2
    for cpu_q in (torch.quantize_per_tensor(x, 0.05, 0 if dtype == torch.qint8 else 3, dtype),
                  torch.quantize_per_tensor(x, 0.05, 0, dtype).transpose(0, 2)):
        expected = cpu_q.flip(dims)
        got = cpu_q.npu().flip(dims)
        _same(got, expected)
        assert got.stride() == expected.stride()
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
        torch.quantize_per_tensor(x, 0.05, 0, dtype).npu().flip((0, 0))


def test_flip_of_a_per_channel_tensor_is_refused_as_on_the_cpu():
    x = torch.randn(3, 4)
    cpu_q = torch.quantize_per_channel(x, torch.rand(4) + 0.05, torch.zeros(4, dtype=torch.long), 1, torch.qint8)
    with pytest.raises(RuntimeError, match="only on uniformly quantized tensor") as cpu_error:
        cpu_q.flip((0,))
    with pytest.raises(RuntimeError, match=str(cpu_error.value)):
        cpu_q.npu().flip((0,))
    # Nothing to move: the CPU copies, and so does npu.
    _same(cpu_q.npu().flip(()), cpu_q.flip(()))


@pytest.mark.parametrize(
    "compute",
    [lambda q: q + q, lambda q: torch.relu(q), lambda q: q.index_select(0, torch.tensor([0]).npu()),
     lambda q: torch.nn.quantized.functional.linear(q, torch.quantize_per_tensor(torch.randn(2, 3), 0.1, 0,
                                                                                 torch.qint8).npu())],
    ids=["add", "relu", "index_select", "quantized_linear"],
)
def test_quantized_compute_is_refused_at_the_call_saying_what_to_do(compute):
    q = torch.quantize_per_tensor(torch.randn(4, 3).npu(), 0.1, 0, torch.quint8)
    with pytest.raises(NotImplementedError, match=r"npu has no quantized kernel for .*Dequantize first"):
        compute(q)


def test_sub_byte_dtypes_are_refused_clearly():
    x = torch.randn(4, 6)
    with pytest.raises(NotImplementedError, match="sub-byte quantized dtype torch.quint4x2"):
        torch.quantize_per_channel(x.npu(), torch.ones(6), torch.zeros(6), 1, torch.quint4x2)
    cpu_q = torch.quantize_per_channel(x, torch.ones(6), torch.zeros(6), 1, torch.quint4x2)
    with pytest.raises(NotImplementedError, match="sub-byte"):
        cpu_q.npu()


def test_the_device_capability_lists_the_quantized_dtypes_npu_supports():
    dtypes = torch.accelerator.get_device_capability("npu:0")["supported_dtypes"]
    assert {torch.quint8, torch.qint8, torch.qint32} <= dtypes
    assert not {torch.quint4x2, torch.quint2x4} & dtypes


def test_a_quantized_round_trip_in_a_loop_under_the_checker_ends_cleanly():
    # Device work reads and writes npu memory only; the host frees nothing it uses.
    x = torch.randn(64, 32)
    expected = torch.quantize_per_tensor(x, 0.03, 5, torch.quint8).dequantize()
    out = None
    for _ in range(200):
        out = torch.quantize_per_tensor(x.npu(), 0.03, 5, torch.quint8).t().contiguous().t().dequantize()
    assert torch.equal(out.cpu(), expected)
