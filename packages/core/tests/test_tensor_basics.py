"""Tensor creation, views, storage ops, fill and copies in every direction."""

from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.int8, torch.uint8, torch.bool, torch.complex64]


def sample(shape, dtype):
    if dtype == torch.bool:
        return torch.arange(int(torch.tensor(shape).prod())).reshape(shape) % 3 == 0
    if dtype.is_complex:
        real = torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float32).reshape(shape)
        return torch.complex(real, -real).to(dtype)
    return (torch.arange(int(torch.tensor(shape).prod())).reshape(shape) % 100).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_every_dtype(dtype):
    host = sample((3, 5), dtype)
    device = host.npu()
    assert device.device.type == "npu" and device.dtype == dtype
    assert torch.equal(device.cpu(), host)


def test_empty_and_empty_strided():
    t = torch.empty(2, 3, device="npu")
    assert t.shape == (2, 3) and t.is_contiguous()
    s = torch.empty_strided((2, 3), (1, 2), device="npu")
    assert s.stride() == (1, 2)
    cl = torch.empty(2, 3, 4, 5, device="npu", memory_format=torch.channels_last)
    assert cl.is_contiguous(memory_format=torch.channels_last)
    assert torch.empty(0, device="npu").numel() == 0


def test_bad_sizes_are_clear_errors():
    with pytest.raises(RuntimeError, match="negative dimension"):
        torch.empty(-1, device="npu")
    with pytest.raises((RuntimeError, torch.OutOfMemoryError)):
        torch.empty(2**62, device="npu")
    assert torch.ones(2).npu().cpu().tolist() == [1.0, 1.0]


def test_views_share_device_memory():
    base = torch.arange(12.0).npu()
    view = base.view(3, 4)
    assert view.data_ptr() == base.data_ptr()
    assert torch.equal(view.cpu(), torch.arange(12.0).view(3, 4))
    t = view.t()
    assert not t.is_contiguous()
    assert torch.equal(t.cpu(), torch.arange(12.0).view(3, 4).t())
    assert torch.equal(base.reshape(2, 6).cpu(), torch.arange(12.0).reshape(2, 6))
    strided = base.as_strided((2, 2), (4, 1), 1)
    assert torch.equal(strided.cpu(), torch.arange(12.0).as_strided((2, 2), (4, 1), 1))
    assert torch.equal(base.unfold(0, 4, 4).cpu(), torch.arange(12.0).unfold(0, 4, 4))
    assert torch.equal(base[2:5].cpu(), torch.tensor([2.0, 3.0, 4.0]))
    assert torch.equal(base.view(3, 4)[:, 1].cpu(), torch.tensor([1.0, 5.0, 9.0]))
    assert torch.equal(base.expand(2, 12).cpu(), torch.arange(12.0).expand(2, 12))


def test_resize_keeps_data_and_grows():
    t = torch.arange(4.0).npu()
    t.resize_(2, 3)
    assert t.shape == (2, 3)
    assert t.cpu().flatten()[:4].tolist() == [0.0, 1.0, 2.0, 3.0]
    t.resize_(1)
    assert t.cpu().tolist() == [0.0]
    with pytest.raises(RuntimeError, match="negative dimension"):
        t.resize_(-2)


def test_set_variants():
    src = torch.arange(6.0).npu()
    t = torch.empty(0, device="npu")
    t.set_(src)
    assert t.data_ptr() == src.data_ptr()
    u = torch.empty(0, device="npu")
    u.set_(src.untyped_storage(), 2, (2, 2), (2, 1))
    assert u.cpu().tolist() == [[2.0, 3.0], [4.0, 5.0]]
    # As on CPU, set_ grows a resizable storage that is too small.
    grown = torch.empty(0, device="npu")
    storage = torch.arange(6.0).npu().untyped_storage()
    grown.set_(storage, 4, (4, 4), (4, 1))
    assert storage.nbytes() >= (4 + 16) * 4
    assert grown.cpu()[0, :2].tolist() == [4.0, 5.0]
    v = torch.arange(3.0).npu()
    v.set_()
    assert v.numel() == 0 and v.device.type == "npu"


def test_fill_zero_and_item():
    t = torch.empty(3, 4, device="npu")
    t.fill_(2.5)
    assert torch.equal(t.cpu(), torch.full((3, 4), 2.5))
    t[:, 1].fill_(-1)
    assert t.cpu()[:, 1].tolist() == [-1.0, -1.0, -1.0]
    t.zero_()
    assert not t.cpu().any()
    t.fill_(torch.tensor(7.0).npu())
    assert t.cpu().eq(7).all()
    assert torch.tensor(3.25).npu().item() == 3.25
    assert torch.tensor([9], dtype=torch.int64).npu().item() == 9
    assert torch.ones(2, device="npu").cpu().tolist() == [1.0, 1.0]
    assert torch.full((2,), 4, device="npu").cpu().tolist() == [4, 4]
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        torch.ones(2).npu().item()


def test_host_to_device_with_dtype_and_layout_changes():
    host = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    dst = torch.empty(4, 3, device="npu", dtype=torch.float64).t()
    dst.copy_(host)
    assert dst.dtype == torch.float64 and not dst.is_contiguous()
    assert torch.equal(dst.cpu(), host.double())
    # A non-contiguous host source, broadcast into the destination.
    row = torch.arange(8.0)[::2]
    dst2 = torch.empty(3, 4, device="npu")
    dst2.copy_(row)
    assert torch.equal(dst2.cpu(), row.expand(3, 4))


def test_device_to_host_with_dtype_and_layout_changes():
    src = torch.arange(12.0).reshape(3, 4).npu().t()
    host = torch.empty(4, 3, dtype=torch.int16)
    host.copy_(src)
    assert torch.equal(host, torch.arange(12.0).reshape(3, 4).t().to(torch.int16))
    host_t = torch.empty(3, 4).t()
    host_t.copy_(src)
    assert torch.equal(host_t, torch.arange(12.0).reshape(3, 4).t())


def test_device_to_device_same_and_across_devices():
    a = torch.arange(10.0).npu(0)
    b = torch.empty(10, device="npu:0")
    b.copy_(a)
    assert torch.equal(b.cpu(), torch.arange(10.0))
    c = torch.empty(10, device="npu:2", dtype=torch.float16)
    c.copy_(a)
    assert torch.equal(c.cpu(), torch.arange(10.0).half())
    d = a.to("npu:3")
    assert d.device == torch.device("npu:3")
    assert torch.equal(d.cpu(), torch.arange(10.0))
    e = torch.empty(5, 2, device="npu:1").t()
    e.copy_(a.view(2, 5))
    assert torch.equal(e.cpu(), torch.arange(10.0).view(2, 5))
    clone = a.clone()
    assert clone.data_ptr() != a.data_ptr() and torch.equal(clone.cpu(), a.cpu())


def test_incompatible_shapes_are_rejected():
    dst = torch.empty(3, device="npu")
    with pytest.raises(RuntimeError, match="cannot be copied into a tensor of shape"):
        dst.copy_(torch.ones(4))
    with pytest.raises(RuntimeError, match="cannot be copied into a tensor of shape"):
        torch.empty(2).copy_(torch.ones(3).npu())
    assert torch.ones(3).npu().cpu().sum().item() == 3.0


def test_core_only_op_names_the_ops_package(python_subprocess):
    # Without the ops plugin, every op beyond core's own says what to install.
    code = """
        import torch, torch_npu
        t = torch.ones(2).npu()
        try:
            torch.add(t, t)
        except NotImplementedError as error:
            print(error)
    """
    result = python_subprocess(code, env={"TORCH_NPU_DISABLE_PLUGINS": "1"})
    assert result.returncode == 0, result.stderr
    assert "aten::add" in result.stdout
    assert "pip install torch-npu-ops" in result.stdout


def test_autograd_through_copies_uses_worker_threads():
    x = torch.arange(3.0, requires_grad=True)
    y = x.npu().cpu()
    y.backward(torch.tensor([1.0, 2.0, 3.0]))
    assert x.grad.tolist() == [1.0, 2.0, 3.0]


def test_storage_resize_frees_and_regrows_like_fsdp2():
    param = torch.arange(1024.0).npu()
    storage = param.untyped_storage()
    before = torch.npu.memory_allocated()
    storage.resize_(0)  # FSDP2 frees a sharded parameter's memory this way
    assert storage.nbytes() == 0
    assert torch.npu.memory_allocated() == before - 4096
    storage.resize_(4096)
    assert storage.nbytes() == 4096
    param.copy_(torch.full((1024,), 2.0))
    assert param.cpu().eq(2).all()
    grown = torch.arange(4.0).npu()
    grown.untyped_storage().resize_(32)  # growing keeps the data
    assert grown.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]

