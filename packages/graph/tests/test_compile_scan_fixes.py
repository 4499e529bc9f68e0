"""Minimal cases of what the wide compiled OpInfo scan
(test_compile_opinfo_full.py) found running eagerly instead of as MLIR
kernels, each compiled, compared with eager npu and required to run
without a fallback (NPUKernelFallbackWarning):

- copies into slices of an output (cat, constant_pad_nd, stack,
  block_diag, diag_embed) call memrefCopy, now ours (Note [Strided copies
  run in our own memrefCopy]); the function itself is tested on strided
  layouts directly;
- prims.rev (flip and what uses it) runs as aten.flip;
- why MLIR refuses a program is in the fallback's message (the first error
  diagnostic), not only on stderr.

Inputs are made inside each test: npu tensors made at import stay
allocated for the whole session.
"""

from __future__ import annotations

import ctypes
import warnings

import pytest
import torch
import torch.nn.functional as F

from torch_npu.graph.compile import _mlir, _runtime
from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")


def _ramp(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    # Distinct values, so that an element copied to the wrong place shows.
    return torch.arange(torch.Size(shape).numel()).to(dtype).reshape(shape).to("npu")


def _compiled_matches_eager_as_mlir(fn, *args: torch.Tensor) -> None:
    expected = fn(*args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = torch.compile(fn, dynamic=False)(*args)
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, NPUKernelFallbackWarning)]
    assert not fallbacks, fallbacks
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


_SLICE_COPIES = {
    "cat_dim1": lambda: (lambda a, b: torch.cat([a, b * 2], 1), _ramp(3, 37), _ramp(3, 20) + 100),
    "cat_of_strided_view": lambda: (lambda a, b: torch.cat([a[:, ::2], b.t()], 0), _ramp(3, 40), _ramp(20, 2)),
    "constant_pad_nd": lambda: (lambda a: F.pad(a, (1, 2, 3, 0), value=-1.0) + 1, _ramp(4, 33)),
    "stack_dim2": lambda: (lambda a, b: torch.stack([a, b], 2), _ramp(3, 5), _ramp(3, 5) + 50),
    "block_diag": lambda: (lambda a, b: torch.block_diag(a, b), _ramp(3, 17), _ramp(2, 4)),
    "diag_embed": lambda: (lambda a: torch.diag_embed(a, offset=1), _ramp(2, 5)),
    "cat_int64": lambda: (lambda a, b: torch.cat([a, b], 1), _ramp(3, 7, dtype=torch.int64),
                          _ramp(3, 2, dtype=torch.int64)),
    "cat_backward": lambda: (lambda a, w: torch.autograd.grad((torch.cat([a, a * 3], 1) * w).sum(), [a]),
                             _ramp(3, 5).requires_grad_(), _ramp(3, 10)),
}


@needs_mlir
@pytest.mark.parametrize("case", sorted(_SLICE_COPIES))
def test_copies_into_slices_run_as_mlir(case):
    # Each fell back with "it needs a copy between strided layouts
    # (memref.copy), which calls MLIR's runtime function memrefCopy".
    fn, *args = _SLICE_COPIES[case]()
    _compiled_matches_eager_as_mlir(fn, *args)


class _Unranked(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int64), ("descriptor", ctypes.c_void_p)]


def _descriptor(t: torch.Tensor) -> ctypes.Array:
    # MLIR's ranked descriptor: allocated, aligned, offset, sizes, strides.
    base = t.data_ptr() - t.storage_offset() * t.element_size()
    return (ctypes.c_int64 * (3 + 2 * t.dim()))(base, base, t.storage_offset(), *t.shape, *t.stride())


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.float64])
def test_memref_copy_between_strided_layouts(tmp_path, dtype):
    # The runtime function itself, on CPU tensors: a permuted, offset,
    # stepped source into an offset, stepped target; the elements around
    # the target's must stay as they were.
    runtime = _runtime.build(str(tmp_path))
    memref_copy = ctypes.CDLL(runtime.shared).memrefCopy
    memref_copy.argtypes = [ctypes.c_int64, ctypes.POINTER(_Unranked), ctypes.POINTER(_Unranked)]
    source_base = torch.arange(4 * 5 * 6).to(dtype).reshape(4, 5, 6)
    source = source_base.permute(2, 0, 1)[1:4, :, ::2]  # shape (3, 4, 3)
    target_base = torch.full((5, 8, 7), -1).to(dtype)
    target = target_base[1:4, ::2, 2:5]
    expected = target_base.clone()
    expected[1:4, ::2, 2:5] = source
    src_desc, dst_desc = _descriptor(source), _descriptor(target)
    memref_copy(source.element_size(), ctypes.byref(_Unranked(source.dim(), ctypes.addressof(src_desc))),
                ctypes.byref(_Unranked(target.dim(), ctypes.addressof(dst_desc))))
    assert torch.equal(target_base, expected)


@needs_mlir
@pytest.mark.parametrize("case", ["flip", "fliplr", "rot90", "cumsum_backward"])
def test_flip_runs_as_mlir(case):
    # prims.rev failed torch-mlir's legalization, so every kernel with a
    # flip ran eagerly.
    x = torch.randn(4, 6, 3, device="npu")
    fns = {
        "flip": lambda x: torch.flip(x, (0, 2)) * 2,
        "fliplr": lambda x: torch.fliplr(x) + 1,
        "rot90": lambda x: torch.rot90(x, 1, (1, 2)).exp(),
        "cumsum_backward": lambda x: torch.autograd.grad((x.cumsum(1) * torch.arange(6, device=x.device).reshape(
            1, 6, 1)).sum(), [x])[0],
    }
    _compiled_matches_eager_as_mlir(fns[case], x.requires_grad_() if case == "cumsum_backward" else x)


@needs_mlir
def test_fallback_message_names_the_op_mlir_refuses(tmp_path, monkeypatch):
    # torch-mlir's exception says only "... failed with the following
    # diagnostics:"; the diagnostic naming the op was printed to stderr.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))

    def program(x: torch.Tensor):
        return (torch.ops.prims.rev.default(x, [0]),)

    with pytest.raises(_mlir.MLIRCompileError, match="torch.prims.rev"):
        _mlir.get_kernel("rev_kernel", "rev", [((5, 5), torch.float32)], program,
                         lambda: [torch.zeros(5, 5)])


@needs_mlir
@pytest.mark.parametrize("pads", [(1, 0), (0, 1), (1, 2, 0, 3), (-1, 1)])
def test_constant_padding_of_a_last_dimension_of_16_compiles(pads):
    # Padded with tensor.pad, LLVM's compile of this kernel did not end
    # for a pad of one element (Note [Paddings as concatenations]).
    x = _ramp(4, 8, 16, 16)
    _compiled_matches_eager_as_mlir(lambda a: F.pad(a, pads, value=0.5) * 2, x)
