"""Core behaviours that PyTorch's device-generic code relies on: legacy
storage types, zero_ for every dtype, resize_ keeping the layout of a tensor
that has the size already, the device capability query, and copies whose
dtype conversion the CPU refuses."""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401


def test_storage_type_names_the_npu_legacy_storage(monkeypatch):
    x = torch.ones(3, device="npu")
    # torch warns once per process: whichever test used a TypedStorage first
    # (torch.save does) would have taken the warning.
    monkeypatch.setattr(torch.storage, "_always_warn_typed_storage_removal", True)
    with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
        storage_type = x.storage_type()
    assert storage_type is torch.npu.FloatStorage
    assert torch.npu.LongStorage._dtype == torch.int64
    assert "FloatStorage" in torch.npu.__all__


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8, torch.bool, torch.complex64,
                                   torch.bits16, torch.float8_e4m3fn])
def test_zero_clears_every_dtype(dtype):
    # Non-zero bytes seen as `dtype` (bits16 has no arithmetic, so no fill_).
    npu = torch.full((4, 3 * dtype.itemsize), 7, dtype=torch.uint8).view(dtype).npu()
    npu.zero_()
    assert npu.cpu().view(torch.uint8).count_nonzero().item() == 0


def test_zero_of_a_strided_view_leaves_the_rest():
    x = torch.ones(4, 4, device="npu")
    x[:, ::2].zero_()
    expected = torch.ones(4, 4)
    expected[:, ::2] = 0
    assert torch.equal(x.cpu(), expected)


def test_resize_to_the_same_sizes_keeps_the_strides():
    x = torch.empty(3, 4, device="npu").t()
    x.resize_(4, 3)
    assert x.stride() == (1, 4)
    x.resize_(2, 6)
    assert x.stride() == (6, 1)


def test_device_capability_lists_the_dtypes():
    capability = torch.accelerator.get_device_capability("npu:0") if hasattr(torch.accelerator, "get_device_capability") \
        else None
    if capability is None:
        pytest.skip("this torch has no torch.accelerator.get_device_capability")
    assert torch.float32 in capability["supported_dtypes"] and torch.bfloat16 in capability["supported_dtypes"]
    with pytest.raises(RuntimeError):
        torch.accelerator.get_device_capability(f"npu:{torch.npu.device_count()}")


def _all_dtypes():
    return sorted({v for v in vars(torch).values() if isinstance(v, torch.dtype)}, key=str)


def test_device_capability_lists_only_dtypes_npu_converts():
    # Every listed dtype but the quantized ones survives a round trip through
    # float32 (complex64) with the CPU's values; the bit-field, sub-byte and float4 dtypes,
    # whose conversions the CPU refuses, are not listed.
    if not hasattr(torch.accelerator, "get_device_capability"):
        pytest.skip("this torch has no torch.accelerator.get_device_capability")
    listed = torch.accelerator.get_device_capability("npu:0")["supported_dtypes"]
    for dtype in listed:
        if dtype in (torch.qint8, torch.quint8, torch.qint32):
            continue
        through = torch.complex64 if dtype.is_complex else torch.float32
        values = torch.arange(0, 8, dtype=torch.float32).to(dtype)
        back = values.npu().to(through).to(dtype).cpu()
        assert torch.equal(back.view(torch.uint8), values.view(torch.uint8)), dtype
    refused = [d for d in _all_dtypes() if d.itemsize <= 2 and str(d)[6:].startswith(("uint", "int", "bits"))
               and d not in (torch.uint8, torch.int8, torch.int16, torch.uint16)] + [torch.float4_e2m1fn_x2]
    assert refused and not set(refused) & listed


@pytest.mark.parametrize("dtype", ["uint1", "int4", "bits8", "float4_e2m1fn_x2"])
def test_a_conversion_the_cpu_refuses_raises_at_the_call(dtype):
    # The CPU copy kernel has no conversion for these dtypes; on npu the copy
    # raised only at the next synchronisation (and then failed the next test).
    dtype = getattr(torch, dtype)
    with pytest.raises(RuntimeError, match="not implemented for") as on_cpu:
        torch.empty(16, dtype=dtype).to(torch.float32)
    x = torch.empty(16, dtype=dtype, device="npu")
    with pytest.raises(RuntimeError) as on_npu:
        x.to(torch.float32)
    # The CPU names its copy kernel or copy_ depending on the layout; both name the dtype.
    assert str(on_npu.value).splitlines()[0].split("not implemented")[1] == \
        str(on_cpu.value).splitlines()[0].split("not implemented")[1]
    with pytest.raises(RuntimeError, match="not implemented for"):
        torch.ones(4, 4, device="npu").t().to(dtype)
    torch.npu.synchronize()  # nothing left to fail later
    assert torch.equal(torch.ones(3, device="npu").to(torch.int64).cpu(), torch.ones(3, dtype=torch.int64))


# Note [Overlapping copies are refused as on CPU]: each copy_ whose source
# and destination share memory other than element for element raises as on
# CPU (it read elements it had already overwritten); the others run as there.
_OVERLAPPING_COPIES = {
    "own transpose": (lambda x: x.copy_(x.t()), "some elements of the input tensor"),
    "shifted rows": (lambda x: x[1:].copy_(x[:-1]), "some elements of the input tensor"),
    "into a transposed view": (lambda x: x.t().copy_(x), "some elements of the input tensor"),
    "a broadcast row of itself": (lambda x: x.copy_(x[0]), "some elements of the input tensor"),
    "into an expanded view": (lambda x: x[:1].expand(4, 4).copy_(torch.ones(4, 4, device=x.device)),
                              "more than one element of the written-to tensor"),
    "itself": (lambda x: x.copy_(x), None),
    "a view of the same elements": (lambda x: x.view(16).copy_(x.view(16)), None),
    "disjoint halves": (lambda x: x[:2].copy_(x[2:]), None),
    "its bits as int32": (lambda x: x.copy_(x.view(torch.int32)), None),
}


@pytest.mark.parametrize("case", _OVERLAPPING_COPIES)
def test_copies_between_overlapping_tensors_behave_as_on_cpu(case):
    copy, error = _OVERLAPPING_COPIES[case]
    results = []
    for device in ("cpu", "npu"):
        x = torch.arange(16, dtype=torch.float32).view(4, 4).to(device)
        if error is not None:
            with pytest.raises(RuntimeError, match=error):
                copy(x)
        else:
            copy(x)
        results.append(x.cpu())
    torch.testing.assert_close(results[1], results[0], rtol=0, atol=0)
