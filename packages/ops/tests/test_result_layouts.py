"""Results on npu have the CPU's strides (npu runs the CPU's kernels).

The generic executor allocates an op's outputs before its kernel runs, from
the meta kernel; torch's Python meta kernels lay them out as the kernel of
the input's device would, CUDA's for a plain meta tensor (Note [Meta kernels
shape the CPU kernel's outputs], csrc/OutputShapes.h). Ops that run
synchronously take the geometry the CPU kernel returned, also a view into a
larger buffer (SynchronousExecution.cpp).
"""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401
from torch._subclasses.fake_tensor import FakeTensorMode


def _check_like_cpu(npu_result, cpu_result):
    npu_tensors = [t for t in (npu_result if isinstance(npu_result, tuple) else (npu_result,))]
    cpu_tensors = [t for t in (cpu_result if isinstance(cpu_result, tuple) else (cpu_result,))]
    assert len(npu_tensors) == len(cpu_tensors)
    for n, c in zip(npu_tensors, cpu_tensors):
        assert n.device.type == "npu"
        assert (n.shape, n.stride(), n.dtype) == (c.shape, c.stride(), c.dtype)


def test_linalg_eig_returns_column_major_eigenvectors_as_the_cpu():
    a = torch.randn(2, 5, 5)
    values, vectors = torch.linalg.eig(a.npu())
    expected = torch.linalg.eig(a)
    assert expected.eigenvectors.stride() == (25, 1, 5)  # the CPU's layout (CUDA's is row-major)
    _check_like_cpu((values, vectors), tuple(expected))
    # Eigenvectors are unique up to a phase: compare what does not depend on it.
    torch.testing.assert_close(values.cpu(), expected.eigenvalues)
    torch.testing.assert_close((vectors @ torch.diag_embed(values) @ torch.linalg.inv(vectors)).cpu(),
                               a.to(torch.complex64), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("norm", [None, "ortho"])
def test_rfftn_strides_and_values_match_the_cpu(norm):
    x = torch.randn(5, 6, 7)
    result = torch.fft.rfftn(x.npu(), norm=norm)
    expected = torch.fft.rfftn(x, norm=norm)
    _check_like_cpu(result, expected)
    torch.testing.assert_close(result.cpu(), expected)


def test_svd_factors_have_the_cpus_strides():
    a = torch.randn(3, 2, 4)
    result = torch.linalg.svd(a.npu(), full_matrices=False)
    expected = torch.linalg.svd(a, full_matrices=False)
    _check_like_cpu(tuple(result), tuple(expected))
    torch.testing.assert_close((result.U @ torch.diag_embed(result.S) @ result.Vh).cpu(), a, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("rows", [2, 3, 4])
def test_lstsq_solution_is_a_view_of_a_column_major_buffer_as_on_the_cpu(rows):
    # The CPU's solution is the top rows of a (max(m, n), k) column-major
    # matrix: strides (1, max(m, n)), not dense when m > n.
    a, b = torch.randn(rows, 3, dtype=torch.float64), torch.randn(rows, 3, dtype=torch.float64)
    result = torch.linalg.lstsq(a.npu(), b.npu(), driver="gels")
    expected = torch.linalg.lstsq(a, b, driver="gels")
    _check_like_cpu(tuple(result), tuple(expected))
    assert result.solution.stride() == (1, max(rows, 3))
    torch.testing.assert_close(result.solution.cpu(), expected.solution)


def test_lstsq_out_takes_the_cpus_geometry():
    a, b = torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)

    def outs(device):
        return (torch.empty(0, dtype=torch.float64, device=device), torch.empty(0, dtype=torch.float64, device=device),
                torch.empty(0, dtype=torch.long, device=device), torch.empty(0, dtype=torch.float64, device=device))

    npu_out, cpu_out = outs("npu"), outs("cpu")
    result = torch.linalg.lstsq(a.npu(), b.npu(), out=npu_out)
    expected = torch.linalg.lstsq(a, b, out=cpu_out)
    assert result.solution is npu_out[0]
    _check_like_cpu(tuple(result), tuple(expected))
    torch.testing.assert_close(result.solution.cpu(), expected.solution)


def test_fake_npu_tensors_are_shaped_as_the_cpu_kernels_outputs():
    # torch.compile's shape propagation sees what eager npu returns: the
    # meta kernels take a fake npu tensor for a CPU one (nonzero_static's
    # result is row-major on the CPU, column-major elsewhere).
    a, x = torch.randn(5, 5).npu(), torch.randn(5, 6, 7).npu()
    mask = torch.tensor([[0.0, 1.0], [2.0, 0.0]]).npu()
    with FakeTensorMode() as mode:
        _, vectors = torch.linalg.eig(mode.from_tensor(a))
        spectrum = torch.fft.rfftn(mode.from_tensor(x), norm="ortho")
        indices = torch.nonzero_static(mode.from_tensor(mask), size=4)
    assert vectors.stride() == torch.linalg.eig(a).eigenvectors.stride() == (1, 5)
    assert spectrum.stride() == torch.fft.rfftn(x, norm="ortho").stride() == (24, 4, 1)
    assert indices.stride() == torch.nonzero_static(mask, size=4).stride() == (2, 1)


def test_plain_meta_tensors_keep_torchs_default_layout():
    # Outside the executor a meta tensor is shaped as torch does it (CUDA's
    # layout): only npu's own shape inference asks for the CPU's.
    _, vectors = torch.linalg.eig(torch.empty(5, 5, device="meta"))
    assert vectors.stride() == (5, 1)
