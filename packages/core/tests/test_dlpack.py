"""DLPack exchange of npu tensors: torch.from_dlpack, __dlpack_device__."""

import torch
from torch.utils.dlpack import DLDeviceType


def test_dlpack_device_of_npu_tensor_is_ext_dev():
    x = torch.arange(4.0, device="npu")
    assert x.__dlpack_device__() == (DLDeviceType.kDLExtDev, 0)
    assert torch.nn.Parameter(x).__dlpack_device__() == (DLDeviceType.kDLExtDev, 0)
    assert torch.arange(2.0).__dlpack_device__() == (DLDeviceType.kDLCPU, 0)


def test_from_dlpack_of_npu_view_shares_memory():
    base = torch.arange(12.0, device="npu")
    view = base[2:].view(2, 5).t()
    y = torch.from_dlpack(view)
    assert y.device == view.device
    assert y.shape == view.shape and y.stride() == view.stride()
    assert y.data_ptr() == view.data_ptr()
    torch.testing.assert_close(y.cpu(), torch.arange(12.0)[2:].view(2, 5).t())
    y[0, 0] = -1.0
    assert base[2].item() == -1.0


def test_from_dlpack_of_capsule_matches_protocol():
    x = torch.arange(6, dtype=torch.int32, device="npu")[1:]
    y = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(x))
    assert y.device == x.device
    torch.testing.assert_close(y.cpu(), torch.arange(1, 6, dtype=torch.int32))
