"""npu convolutions as the CPU and torch's fake-tensor rule have them.

- The output is contiguous whenever the convolution runs (Note [Convolution
  gradients in the layout fake tensors give them], csrc/ConvolutionKernels.cpp).
  The meta kernel lays it out contiguous, as the fake-tensor rule of the
  Overrideable backend does; a convolution run synchronously, among the first
  ops of a process before the Python meta kernels are ready, took the CPU
  kernel's layout instead: channels-last for a channels-last input. The same
  convolution returned another layout a second later. Found by probing
  PyTorch's test_convolution on npu (a stride check flipped between runs).
- A transposed convolution refuses an output padding not smaller than its
  stride or dilation at the call, with the CPU's message; after a clean call
  of the same signature it used to fail at a later synchronization.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch._dynamo  # noqa: F401  (activates the Python meta kernels)
import torch.nn.functional as F

import torch_npu  # noqa: F401

WARMUP_ON = {"TORCH_NPU_META_WARMUP": "1"}


def test_channels_last_convolution_has_one_layout_before_and_after_the_warmup(python_subprocess_env):
    code = """
        import json, threading, torch, torch_npu
        import torch.nn.functional as F
        torch.manual_seed(0)
        x = torch.randn(2, 3, 8, 8).contiguous(memory_format=torch.channels_last)
        w = torch.randn(4, 3, 3, 3)
        xn, wn = torch.empty_strided(x.shape, x.stride(), device="npu").copy_(x), w.npu()
        torch_npu.ops.reset_execution_counters()
        first = F.conv2d(xn, wn)  # the first executor op: synchronous, no meta kernel yet
        synchronous = torch_npu.ops.synchronous_ops()
        [t.join() for t in threading.enumerate() if t.name == "torch_npu-meta-warmup"]
        later = F.conv2d(xn, wn)
        expected = F.conv2d(x, w)
        print(json.dumps({"synchronous": synchronous, "first": first.stride(), "later": later.stride(),
                          "values": torch.allclose(first.cpu(), expected, atol=1e-5)
                          and torch.allclose(later.cpu(), expected, atol=1e-5)}))
    """
    result = python_subprocess_env(code, WARMUP_ON)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["synchronous"] == {"aten::convolution": 1}
    assert out["first"] == out["later"] == [144, 36, 6, 1]  # contiguous, both times
    assert out["values"]


def test_convolutions_of_every_layout_compute_what_the_cpu_computes():
    torch.manual_seed(1)
    x = torch.randn(2, 6, 9, 9)
    w = torch.randn(4, 3, 3, 3)
    for t in (x, x.contiguous(memory_format=torch.channels_last), x.transpose(2, 3)):
        npu_t = torch.empty_strided(t.shape, t.stride(), device="npu").copy_(t)
        got = F.conv2d(npu_t, w.npu(), groups=2, padding=1)
        assert got.is_contiguous()
        torch.testing.assert_close(got.cpu(), F.conv2d(t, w, groups=2, padding=1), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("conv", "shape", "weight_shape", "kwargs"),
    [
        (F.conv_transpose1d, (1, 3, 4), (3, 2, 3), {"stride": 2, "output_padding": 2}),
        (F.conv_transpose2d, (1, 3, 4, 4), (3, 2, 3, 3), {"stride": (2, 3), "output_padding": (1, 3)}),
        (F.conv_transpose2d, (1, 3, 4, 4), (3, 2, 3, 3), {"stride": 2, "dilation": 3, "output_padding": (2, 3)}),
        (F.conv_transpose3d, (1, 3, 4, 4, 4), (3, 2, 3, 3, 3), {"stride": 2, "output_padding": (1, 1, 2)}),
    ],
)
def test_transposed_convolution_refuses_a_large_output_padding_at_the_call(conv, shape, weight_shape, kwargs):
    torch.manual_seed(2)
    x, w = torch.randn(shape), torch.randn(weight_shape)
    # A clean call of the same signature first (output padding 1 < stride 2).
    clean = {"stride": 2, "output_padding": 1}
    torch.testing.assert_close(conv(x.npu(), w.npu(), **clean).cpu(), conv(x, w, **clean), atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError) as on_cpu:
        conv(x, w, **kwargs)
    with pytest.raises(RuntimeError) as on_npu:
        conv(x.npu(), w.npu(), **kwargs)
    assert str(on_npu.value) == str(on_cpu.value)
    torch.npu.synchronize()  # nothing left to fail later
    # Without elements the CPU computes no output padding, and neither does npu.
    empty = torch.randn(0, *shape[1:])
    assert conv(empty.npu(), w.npu(), **kwargs).shape == conv(empty, w, **kwargs).shape
