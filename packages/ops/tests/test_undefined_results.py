"""Results the CPU kernel returns undefined stay None on npu (Note [Results
the CPU kernel leaves undefined], csrc/UndefinedResults.h).

torch's Python meta kernel of _native_multi_head_attention gives an empty
tensor for the attention weights when need_weights=False, where the CPU
kernel returns none; once the Python meta kernels were active the npu op
returned tensor([]) there.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo  # noqa: F401  (the Python meta kernels become active)
import torch_npu  # noqa: F401

_E, _H = 16, 4


def _native_mha(device, x, lin, proj, need_weights, average):
    x = x.to(device)
    with torch.no_grad():
        return torch._native_multi_head_attention(
            x, x, x, _E, _H,
            lin.weight.to(device), lin.bias.to(device), proj.weight.to(device), proj.bias.to(device),
            None, need_weights=need_weights, average_attn_weights=average, mask_type=1,
        )


@pytest.mark.parametrize("average", [True, False], ids=["averaged", "per_head"])
@pytest.mark.parametrize("need_weights", [False, True], ids=["no_weights", "weights"])
def test_native_multi_head_attention_weights_as_on_the_cpu(need_weights, average):
    torch.manual_seed(0)
    x = torch.randn(3, 5, _E)
    lin, proj = torch.nn.Linear(_E, 3 * _E), torch.nn.Linear(_E, _E)
    out_cpu, w_cpu = _native_mha("cpu", x, lin, proj, need_weights, average)
    for _ in range(2):  # the first call of a signature is verified, the next one queued
        out, w = _native_mha("npu", x, lin, proj, need_weights, average)
        torch.testing.assert_close(out.cpu(), out_cpu)
        if need_weights:
            torch.testing.assert_close(w.cpu(), w_cpu)
        else:
            assert w_cpu is None and w is None


def test_multihead_attention_fast_path_without_weights_gives_none():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(_E, _H, batch_first=True).eval()
    x = torch.randn(2, 4, _E)
    with torch.no_grad():
        out_cpu, w_cpu = mha(x, x, x, need_weights=False)
        mha.npu()
        xn = x.npu()
        out, w = mha(xn, xn, xn, need_weights=False)
    assert w_cpu is None and w is None
    torch.testing.assert_close(out.cpu(), out_cpu)


_MASKS = [(False, True, True), (False, False, True), (True, False, False), (True, True, True)]


@pytest.mark.parametrize("mask", _MASKS, ids=lambda m: "".join("1" if b else "0" for b in m))
@pytest.mark.parametrize("op", ["native_batch_norm_backward", "batch_norm_backward"])
def test_batch_norm_backward_leaves_masked_gradients_undefined(op, mask):
    torch.manual_seed(0)
    x, grad = torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4)
    weight, mean, invstd = torch.randn(3), torch.randn(3), torch.rand(3) + 0.5

    def run(device):
        d = [t.to(device) for t in (grad, x, weight, mean, invstd)]
        if op == "native_batch_norm_backward":
            return torch.ops.aten.native_batch_norm_backward(d[0], d[1], d[2], None, None, d[3], d[4], True, 1e-5,
                                                             list(mask))
        reserve = torch.empty(0, device=device)
        return torch.ops.aten.batch_norm_backward(d[0], d[1], d[2], None, None, d[3], d[4], True, 1e-5, list(mask),
                                                  reserve)

    expected = run("cpu")
    for _ in range(2):
        result = run("npu")
        assert [r is None for r in result] == [e is None for e in expected] == [not m for m in mask]
        for r, e in zip(result, expected):
            if e is not None:
                torch.testing.assert_close(r.cpu(), e)
