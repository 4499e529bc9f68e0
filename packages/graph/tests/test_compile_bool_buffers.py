"""A bool value a compiled kernel keeps in a buffer and reads twice (a mask
that is summed and also selects) is read back as it was written (Note [Bool
buffers of a kernel in bytes] in compile/_byte_bools.py). Before, vectorised
loops stored it as packed bits and other loops read bytes: the sum was wrong
(5460 for 33) and compiled BERT training gave losses of 0.02 for 4.58."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo

from torch_npu.graph import compile as npu_compile
from torch_npu.graph.compile import _byte_bools, _mlir

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")


def _cross_entropy_counts(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # cross-entropy's ignore_index: the mask is counted and selects.
    keep = labels != -100
    picked = torch.where(keep, labels, 0)
    loss = -torch.log_softmax(logits, -1).gather(1, picked[:, None])[:, 0]
    return keep.sum(), torch.where(keep, loss, 0.0).sum() / keep.sum()


CASES = {
    "sum and where": (lambda x: ((x > 0).sum(), torch.where(x > 0, x, 0.0)), (256,)),
    "sum and the mask": (lambda x: ((x > 0).sum(), x > 0), (64,)),
    "float sum and where": (lambda x: ((x > 0).float().sum(), torch.where(x > 0, x, 0.0)), (96,)),
    "row counts and where": (lambda x: ((x > 0).sum(-1), torch.where(x > 0, x, -x)), (8, 48)),
}


@needs_mlir
@pytest.mark.parametrize("case", list(CASES))
def test_a_mask_read_twice_in_a_kernel(case):
    fn, shape = CASES[case]
    torch.manual_seed(0)
    x = torch.randn(*shape, device="npu")
    expected = fn(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", npu_compile.NPUKernelFallbackWarning)  # compiled, not run eagerly
        actual = torch.compile(fn)(x)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)


@needs_mlir
def test_cross_entropy_with_ignored_labels():
    torch.manual_seed(0)
    logits = torch.randn(64, 96, device="npu")
    labels = torch.randint(0, 96, (64,), device="npu")
    labels[::5] = -100
    expected = _cross_entropy_counts(logits, labels)
    actual = torch.compile(_cross_entropy_counts)(logits, labels)
    assert actual[0].item() == expected[0].item() == 51
    torch.testing.assert_close(actual[1], expected[1])


def test_the_rewrite_of_a_bool_buffer():
    module = "\n".join([
        "    %alloc = memref.alloc() {alignment = 64 : i64} : memref<64xi1>",
        "      affine.store %1, %alloc[%arg3] : memref<64xi1>",
        "      %0 = affine.load %alloc[%arg3] : memref<64xi1>",
        "      %alloc_0 = memref.alloc() : memref<4xf32>",
        "    memref.dealloc %alloc : memref<64xi1>",
    ])
    assert _byte_bools.bool_buffers_as_bytes(module).splitlines() == [
        "    %alloc = memref.alloc() {alignment = 64 : i64} : memref<64xi8>",
        "      %__byte_bool0 = arith.extui %1 : i1 to i8",
        "      affine.store %__byte_bool0, %alloc[%arg3] : memref<64xi8>",
        "      %__byte_bool1 = affine.load %alloc[%arg3] : memref<64xi8>",
        "      %0 = arith.trunci %__byte_bool1 : i8 to i1",
        "      %alloc_0 = memref.alloc() : memref<4xf32>",
        "    memref.dealloc %alloc : memref<64xi8>",
    ]
    # Any other use: refused (the kernel then runs its aten ops eagerly).
    with pytest.raises(_byte_bools.ByteBoolsError, match="other than by affine loads and stores"):
        _byte_bools.bool_buffers_as_bytes(module + "\n    memref.copy %alloc, %x : memref<64xi1> to memref<64xi1>")


def test_the_rewrite_of_a_reshaped_bool_buffer():
    # Note [Reshaped views of a bool buffer]: cross-entropy's mask of kept
    # labels, written per row and read as a column ([N] seen as [N, 1]).
    module = "\n".join([
        "    %alloc = memref.alloc() {alignment = 64 : i64} : memref<8xi1>",
        "      affine.store %5, %alloc[%arg3] : memref<8xi1>",
        "    %expand_shape_1 = memref.expand_shape %alloc [[0, 1]] output_shape [8, 1] : memref<8xi1> into "
        "memref<8x1xi1>",
        "        %4 = affine.load %expand_shape_1[%arg3, %arg4] : memref<8x1xi1>",
        "    %collapse_shape = memref.collapse_shape %expand_shape_1 [[0, 1]] : memref<8x1xi1> into memref<8xi1>",
        "      %6 = affine.load %collapse_shape[%arg3] : memref<8xi1>",
        "    memref.dealloc %alloc : memref<8xi1>",
    ])
    assert _byte_bools.bool_buffers_as_bytes(module).splitlines() == [
        "    %alloc = memref.alloc() {alignment = 64 : i64} : memref<8xi8>",
        "      %__byte_bool0 = arith.extui %5 : i1 to i8",
        "      affine.store %__byte_bool0, %alloc[%arg3] : memref<8xi8>",
        "    %expand_shape_1 = memref.expand_shape %alloc [[0, 1]] output_shape [8, 1] : memref<8xi8> into "
        "memref<8x1xi8>",
        "        %__byte_bool1 = affine.load %expand_shape_1[%arg3, %arg4] : memref<8x1xi8>",
        "        %4 = arith.trunci %__byte_bool1 : i8 to i1",
        "    %collapse_shape = memref.collapse_shape %expand_shape_1 [[0, 1]] : memref<8x1xi8> into memref<8xi8>",
        "      %__byte_bool2 = affine.load %collapse_shape[%arg3] : memref<8xi8>",
        "      %6 = arith.trunci %__byte_bool2 : i8 to i1",
        "    memref.dealloc %alloc : memref<8xi8>",
    ]
    # A reshape of an i1 memref that is not one of the kernel's buffers
    # (an argument) is refused, as any other i1 memref is.
    with pytest.raises(_byte_bools.ByteBoolsError):
        _byte_bools.bool_buffers_as_bytes(
            "    %e = memref.expand_shape %arg0 [[0, 1]] output_shape [8, 1] : memref<8xi1> into memref<8x1xi1>")
