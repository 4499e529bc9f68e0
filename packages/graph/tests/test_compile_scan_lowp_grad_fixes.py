"""Minimal cases of what the bfloat16 and float16 gradient runs of the wide
compiled OpInfo scan (test_compile_opinfo_full.py with
TORCH_NPU_COMPILE_OPINFO_GRAD_DTYPES) found, each compiled and compared with
eager npu and, where precision is the question, a float64 CPU reference:

- a kernel converting float64 values to bfloat16 (float_power's backward of
  bfloat16 inputs) could not be compiled: LLVM called ``__truncdfbf2``,
  which libgcc before GCC 13 lacks, and the kernel ran eagerly with a
  fallback warning. The conversion now rounds through float32, as eager's
  c10 conversion does (Note [Float64 to half precision through float32]);
- arithmetic of a half tensor with a number its type cannot hold (pi)
  rounded the number to the half type first, where eager computes with it
  in float32: sinc's gradient, which starts from pi * x, was 0.1 off
  eager's in bfloat16, silently; such an op is now computed in float32
  with the rest of its kernel and rounded once (Note [Half-precision
  pointwise work in float32]);
- the chunked linear_cross_entropy's gradient in float16 and bfloat16 did
  not compile ("copy is neither computed by the group nor read by it"): its
  backward overwrites a product with a converted slice of the input, and
  the program computed the overwritten product too (Note [Copies read their
  source only]).

Inputs are made inside each test: npu tensors made at import stay
allocated for the whole session.
"""

from __future__ import annotations

import math

import pytest
import torch

from torch_npu.graph.compile import _mlir
from _mlir_only import compiled_as_mlir

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_float64_to_half_rounds_through_float32_as_eager(dtype: torch.dtype) -> None:
    # Each value lies just above the midpoint between two neighbours of the
    # half type, closer than float32 resolves: rounded directly it goes up,
    # through float32 (as eager's c10 conversion does) it is a tie that
    # rounds to even, down.
    mantissa_bits = 7 if dtype == torch.bfloat16 else 10
    ties = [1 + 2.0 ** -(mantissa_bits + 1), 3 + 2.0 ** -(mantissa_bits)]
    values = torch.tensor([t + 2.0 ** -40 for t in ties] + [-2.5, 1e-3, 0.0], dtype=torch.float64).to("npu")

    def fn(x):
        return (x * 1.0).to(dtype)

    expected = fn(values)
    actual = compiled_as_mlir(fn, values)
    assert actual.dtype == dtype
    assert torch.equal(actual.cpu(), expected.cpu())
    assert actual[0].item() == 1.0  # the tie of float32, rounded to even


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_float_power_gradients_of_half_inputs_compile(dtype: torch.dtype) -> None:
    # float_power computes in float64; its gradients are converted back to
    # the inputs' half type inside the backward kernel.
    base = torch.tensor([0.5, 1.25, 2.0, 3.5, 7.0], dtype=torch.float64)
    exponent = torch.tensor([2.0, -1.5, 0.5, 1.25, 3.0], dtype=torch.float64)

    def fn(x, y):
        return torch.autograd.grad(torch.float_power(x, y).sum(), (x, y))

    inputs = [t.to(dtype).to("npu").requires_grad_(True) for t in (base, exponent)]
    expected = fn(*inputs)
    actual = compiled_as_mlir(fn, *inputs)
    assert [t.dtype for t in actual] == [dtype, dtype]
    torch.testing.assert_close(actual, expected, atol=0.0, rtol=0.0)
    reference = fn(*[t.to(dtype).double().requires_grad_(True) for t in (base, exponent)])
    torch.testing.assert_close([t.cpu().double() for t in actual], list(reference), atol=1e-2, rtol=1e-2)


@needs_mlir
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_arithmetic_with_a_number_as_eager(dtype: torch.dtype) -> None:
    # pi is 3.140625 in either half type: pi * x with the number rounded
    # first differs from eager's float32 pi * x (-6.625: -20.75 for -20.875
    # in bfloat16), and so does sinc's gradient, which starts from it.
    x = torch.tensor([-6.625, 8.5, 0.3, -1.7, 2.25, 100.0], dtype=torch.float64).to(dtype).to("npu")

    def fn(x):
        return x * math.pi, x / 0.3 - 0.1, torch.add(x, x, alpha=0.1), 1.1 - x

    expected = fn(x)
    actual = compiled_as_mlir(fn, x)
    assert [t.dtype for t in actual] == [dtype] * 4
    # Each result is computed in float32 and rounded once (Note
    # [Half-precision pointwise work in float32]): float64's value rounded
    # once. Eager rounds after each op, so for the two chains (x / 0.3 -
    # 0.1, and 1.1 - x, whose 1.1 eager rounds first) it may be an ulp off;
    # the single ops are eager's, bit for bit.
    rounded_once = [t.to(dtype) for t in fn(x.cpu().double())]
    for a, r in zip(actual, rounded_once):
        assert torch.equal(a.cpu(), r), (a, r)
    for a, e in zip(actual[::2], expected[::2]):
        assert torch.equal(a.cpu(), e.cpu()), (a, e)
    if dtype == torch.bfloat16:
        assert actual[0][0].item() == -20.875

    def gradient(x):
        return torch.autograd.grad((torch.sinc(x).float() * 6).sum(), x)[0]

    source = x.detach().requires_grad_(True)
    expected_gradient = gradient(source)
    actual_gradient = compiled_as_mlir(gradient, source)
    # The backward's chain is computed in float32 and rounded once: within
    # one rounding of float64, where eager's (rounded per op, cancelling)
    # is far off in bfloat16 (-0.0596 for -0.0264 at 8.5).
    reference = gradient(x.cpu().double().requires_grad_(True))
    tolerance = 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -10
    torch.testing.assert_close(actual_gradient.cpu().double(), reference, atol=1e-4, rtol=tolerance)
    compiled_error = (actual_gradient.cpu().double() - reference).abs()
    eager_error = (expected_gradient.cpu().double() - reference).abs()
    assert bool((compiled_error <= eager_error + 1e-3).all()), (actual_gradient, expected_gradient)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_chunked_linear_cross_entropy_gradients_compile(dtype: torch.dtype) -> None:
    from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(8, 3, generator=generator).to(dtype)
    weight = torch.randn(4, 3, generator=generator).to(dtype)
    target = torch.randint(0, 4, (8,), generator=generator).npu()
    options = LinearCrossEntropyOptions(batch_chunk_size=2)

    def loss_and_gradients(a: torch.Tensor, w: torch.Tensor, t: torch.Tensor):
        loss = torch.nn.functional.linear_cross_entropy(a, w, t, reduction="none", options=options)
        return (loss, *torch.autograd.grad(loss.float().sum(), (a, w)))

    leaves = [x.npu().requires_grad_(), weight.npu().requires_grad_()]
    compiled = compiled_as_mlir(loss_and_gradients, *leaves, target)
    eager = loss_and_gradients(*leaves, target)
    for c, e in zip(compiled, eager):
        torch.testing.assert_close(c.float(), e.float(), atol=2e-2, rtol=2e-2)
