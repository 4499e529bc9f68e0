"""Sparse npu tensors: COO and the compressed layouts hold their indices and
values in npu memory, and their ops run the CPU's sparse kernels as device
work, with the CPU's results."""

from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.ops import execution_counters

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state")

COMPRESSED = [torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc]


def dense_sample(dtype=torch.float32, shape=(6, 8), seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(dtype)
    return x * (torch.rand(shape, generator=g) < 0.4)


def to_layout(x: torch.Tensor, layout: torch.layout) -> torch.Tensor:
    if layout == torch.sparse_coo:
        return x.to_sparse()
    blocksize = (2, 2) if layout in (torch.sparse_bsr, torch.sparse_bsc) else None
    return x.to_sparse(layout=layout, blocksize=blocksize)


def members(t: torch.Tensor) -> list[torch.Tensor]:
    if t.layout == torch.sparse_coo:
        return [t._indices(), t._values()]
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        return [t.crow_indices(), t.col_indices(), t.values()]
    return [t.ccol_indices(), t.row_indices(), t.values()]


def assert_same_sparse(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Same layout, size and members, bit for bit (actual may be on npu)."""
    assert actual.layout == expected.layout
    assert actual.shape == expected.shape
    if expected.layout == torch.sparse_coo:
        assert actual.is_coalesced() == expected.is_coalesced()
    for a, e in zip(members(actual), members(expected)):
        torch.testing.assert_close(a.cpu(), e, rtol=0, atol=0)


@pytest.mark.parametrize("layout", [torch.sparse_coo, *COMPRESSED], ids=str)
def test_sparse_tensor_moves_to_npu_with_its_members_in_npu_memory(layout):
    cpu = to_layout(dense_sample(), layout)
    npu = cpu.npu()
    assert npu.device.type == "npu" and npu.layout == layout
    assert all(m.device.type == "npu" for m in members(npu))
    assert npu._nnz() == cpu._nnz()
    assert_same_sparse(npu, cpu)
    assert_same_sparse(npu.cpu(), cpu)


@pytest.mark.parametrize("layout", [torch.sparse_coo, *COMPRESSED], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.complex64], ids=str)
def test_dense_npu_tensor_converts_to_a_sparse_npu_tensor_as_on_the_cpu(layout, dtype):
    x = dense_sample(dtype)
    expected = to_layout(x, layout)
    actual = to_layout(x.npu(), layout)
    assert actual.device.type == "npu"
    assert_same_sparse(actual, expected)
    torch.testing.assert_close(actual.to_dense().cpu(), x, rtol=0, atol=0)


def test_sparse_ops_give_the_cpus_results():
    a, b = dense_sample(seed=1), dense_sample(seed=2)
    dense = torch.randn(8, 5, generator=torch.Generator().manual_seed(3))
    coo_a, coo_b = a.to_sparse(), b.to_sparse()
    csr_a = a.to_sparse_csr()
    results = {}
    for device in ("cpu", "npu"):
        ca, cb, ra, d = (t.to(device) for t in (coo_a, coo_b, csr_a, dense))
        results[device] = {
            "coo + coo": (ca + cb).coalesce(),
            "coo * 3": ca * 3,
            "coo.coalesce": (ca + ca).coalesce(),
            "coo @ dense": torch.sparse.mm(ca, d),
            "csr @ dense": ra @ d,
            "csr.sin": ra.sin(),
            "csr * 2": ra * 2,
            "sampled_addmm": torch.sparse.sampled_addmm(ra, d.t()[:, :6].t().contiguous(), d.t()),
            "sum": torch.sparse.sum(ca),
        }
    for name, expected in results["cpu"].items():
        actual = results["npu"][name]
        assert actual.device.type == "npu", name
        if expected.layout == torch.strided:
            torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, msg=name)
        else:
            assert_same_sparse(actual, expected)


def test_in_place_ops_update_the_sparse_npu_tensor():
    x = dense_sample()
    coo, csr = x.to_sparse().npu(), x.to_sparse_csr().npu()
    coo.mul_(2)
    csr.sin_()
    torch.testing.assert_close(coo.to_dense().cpu(), x * 2, rtol=0, atol=0)
    torch.testing.assert_close(csr.to_dense().cpu(), x.to_sparse_csr().sin().to_dense(), rtol=0, atol=0)
    assert all(m.device.type == "npu" for m in members(coo) + members(csr))


def test_sparse_ops_run_as_device_work_and_wait_for_sparse_results():
    coo = dense_sample().to_sparse().npu()
    before = execution_counters()["device_sync"]
    (coo + coo).coalesce()
    assert execution_counters()["device_sync"] > before


def test_sparse_ops_with_dense_results_and_a_meta_kernel_do_not_wait():
    # The sparse meta kernel sizes a CSR tensor's to_dense: it is queued like
    # a dense op.
    x = dense_sample()
    csr = x.to_sparse_csr().npu()
    torch.npu.synchronize()
    before = execution_counters()
    torch.npu._sleep(100 * torch.npu._cycles_per_ms())
    dense = csr.to_dense()
    after = execution_counters()
    assert not torch.npu.current_stream().query()  # the host did not wait
    assert after["device_sync"] == before["device_sync"]
    assert after["device_async"] > before["device_async"]
    torch.testing.assert_close(dense.cpu(), x, rtol=0, atol=0)


SPARSE_TIMES_DENSE = {
    "mm": lambda s, d, v, c: torch.mm(s, d),
    "matmul": lambda s, d, v, c: s @ d,
    "addmm": lambda s, d, v, c: torch.addmm(c, s, d, beta=0.5, alpha=2.0),
    "sparse.mm": lambda s, d, v, c: torch.sparse.mm(s, d),
    "mv": lambda s, d, v, c: torch.mv(s, v),
}


def product_operands(layout, device, seed=0):
    x = dense_sample(seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    d, v, c = torch.randn(8, 5, generator=g), torch.randn(8, generator=g), torch.randn(6, 5, generator=g)
    return to_layout(x, layout).to(device), d.to(device), v.to(device), c.to(device)


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr, torch.sparse_csc], ids=str)
@pytest.mark.parametrize("name", SPARSE_TIMES_DENSE)
def test_sparse_times_dense_products_wait_only_the_first_time(layout, name):
    # PyTorch has no sparse meta kernel for the matrix products. The first
    # call with a structure runs synchronously and confirms that the dense
    # product's meta kernel predicts the CPU's result; later calls are queued.
    product = SPARSE_TIMES_DENSE[name]
    cpu_operands = product_operands(layout, "cpu")
    expected = product(*cpu_operands)
    first = product(*product_operands(layout, "npu"))
    torch.testing.assert_close(first.cpu(), expected)
    for seed in (1, 2):  # other values, same structure
        operands = product_operands(layout, "npu", seed)
        torch.npu.synchronize()
        before = execution_counters()
        torch.npu._sleep(100 * torch.npu._cycles_per_ms())
        result = product(*operands)
        after = execution_counters()
        assert not torch.npu.current_stream().query()  # the host did not wait
        assert after["device_sync"] == before["device_sync"]
        expected = product(*product_operands(layout, "cpu", seed))
        assert result.shape == expected.shape and result.stride() == expected.stride()
        torch.testing.assert_close(result.cpu(), expected)


def test_batched_sparse_product_and_its_backward_match_the_cpu():
    x = torch.stack([dense_sample(seed=0), dense_sample(seed=1)])
    d = torch.randn(2, 8, 3, requires_grad=True)
    d_npu = d.detach().npu().requires_grad_()
    for _ in range(2):  # the second time queued
        expected = torch.bmm(x.to_sparse(), d)
        result = torch.bmm(x.to_sparse().npu(), d_npu)
        torch.testing.assert_close(result.cpu(), expected)
    expected.sum().backward()
    result.sum().backward()
    torch.testing.assert_close(d_npu.grad.cpu(), d.grad)


def test_dense_times_sparse_is_queued_in_the_cpus_layout():
    # The CPU returns dense @ COO column-major, unlike the dense product's
    # meta kernel: the layout is learnt from the first (synchronous) call.
    x = dense_sample()
    for layout in (torch.sparse_coo, torch.sparse_csr):
        for seed in range(3):
            d = torch.randn(3, 6, generator=torch.Generator().manual_seed(seed))
            expected = d @ to_layout(x, layout)
            before = execution_counters()["device_sync"]
            result = d.npu() @ to_layout(x, layout).npu()
            if seed > 0:  # the first call with this structure may have waited
                assert execution_counters()["device_sync"] == before
            assert result.stride() == expected.stride()
            torch.testing.assert_close(result.cpu(), expected)


def test_products_with_sparse_results_keep_waiting():
    x = dense_sample()
    for layout in (torch.sparse_coo, torch.sparse_csr):
        s = to_layout(x, layout)
        expected = s @ to_layout(x.t().contiguous(), layout)
        for _ in range(2):
            before = execution_counters()["device_sync"]
            result = s.npu() @ to_layout(x.t().contiguous(), layout).npu()
            assert execution_counters()["device_sync"] > before
        assert result.layout == expected.layout
        torch.testing.assert_close(result.to_dense().cpu(), expected.to_dense())


def test_a_queued_sparse_product_still_raises_argument_errors_at_the_call():
    s, d, _, _ = product_operands(torch.sparse_csr, "npu")
    torch.mm(s, d)  # learned
    with pytest.raises(RuntimeError) as on_cpu:
        torch.mm(s.cpu(), torch.randn(7, 5))
    with pytest.raises(RuntimeError) as on_npu:
        torch.mm(s, torch.randn(7, 5).npu())
    # The CPU's message, plus the line that launched the op.
    assert str(on_npu.value).startswith(str(on_cpu.value).splitlines()[0])
    torch.testing.assert_close(torch.mm(s, d).cpu(), torch.mm(s.cpu(), d.cpu()))


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
def test_sparse_mm_reduce_backward_matches_the_cpu(reduce):
    # The CPU kernel keeps the amax/amin argument indices only when an input
    # requires grad: it must see that on npu too, or the backward reads none.
    x = dense_sample(shape=(5, 5))
    other = torch.randn(5, 3, generator=torch.Generator().manual_seed(4))
    grads = {}
    for device in ("cpu", "npu"):
        csr = x.to_sparse_csr().to(device).requires_grad_()
        d = other.to(device).requires_grad_()
        out = torch.sparse.mm(csr, d, reduce)
        g_csr, g_d = torch.autograd.grad(out, [csr, d], torch.ones_like(out))
        grads[device] = (out.detach().cpu(), g_csr.cpu().to_dense(), g_d.cpu())
    for actual, expected in zip(grads["npu"], grads["cpu"]):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)


def test_gradient_flows_through_a_sparse_conversion():
    x = dense_sample()
    grads = {}
    for device in ("cpu", "npu"):
        leaf = x.detach().clone().to(device).requires_grad_()
        (leaf.to_sparse().to_dense() * torch.arange(8.0, device=device)).sum().backward()
        grads[device] = leaf.grad.cpu()
    torch.testing.assert_close(grads["npu"], grads["cpu"], rtol=0, atol=0)


def test_factories_and_constructors_make_sparse_npu_tensors():
    indices = torch.tensor([[0, 1, 1], [2, 0, 2]])
    values = torch.tensor([3.0, 4.0, 5.0])
    expected = torch.sparse_coo_tensor(indices, values, (2, 3), check_invariants=True).to_dense()
    coo = torch.sparse_coo_tensor(indices.npu(), values.npu(), (2, 3), check_invariants=True)
    assert coo.device.type == "npu" and coo.layout == torch.sparse_coo
    torch.testing.assert_close(coo.to_dense().cpu(), expected, rtol=0, atol=0)
    csr = torch.sparse_csr_tensor(
        torch.tensor([0, 1, 3]).npu(), torch.tensor([2, 0, 2]).npu(), values.npu(), (2, 3),
        check_invariants=True)
    torch.testing.assert_close(csr.to_dense().cpu(), expected, rtol=0, atol=0)
    for layout in (torch.sparse_coo, torch.sparse_csr):
        zeros = torch.zeros(2, 3, layout=layout, device="npu")
        assert zeros.device.type == "npu" and zeros.layout == layout and zeros._nnz() == 0
        torch.testing.assert_close(zeros.to_dense().cpu(), torch.zeros(2, 3), rtol=0, atol=0)


def test_invalid_sparse_tensors_and_unsupported_ops_raise_as_on_the_cpu():
    bad_indices = torch.tensor([[0, 5]])
    values = torch.tensor([1.0, 2.0])
    for device in ("cpu", "npu"):
        with pytest.raises(RuntimeError, match="found index 5"):
            torch.sparse_coo_tensor(bad_indices.to(device), values.to(device), (2,), check_invariants=True)
    coo = dense_sample().to_sparse()
    with pytest.raises((RuntimeError, NotImplementedError)) as on_cpu:
        coo.exp()
    with pytest.raises((RuntimeError, NotImplementedError)) as on_npu:
        coo.npu().exp()
    assert type(on_npu.value) is type(on_cpu.value)
    # The device still works.
    torch.testing.assert_close((coo.npu() * 2).to_dense().cpu(), coo.to_dense() * 2, rtol=0, atol=0)


def test_strict_mode_allows_sparse_ops(python_subprocess_env):
    # Sparse results are data-dependent: waiting for them is not a slow path.
    code = """
        import torch, torch_npu
        x = torch.tensor([[0.0, 1.0], [2.0, 0.0]]).npu()
        s = x.to_sparse()
        print((s + s).coalesce()._nnz(), x.to_sparse_csr().to_dense().cpu().sum().item())
    """
    result = python_subprocess_env(code, {"TORCH_NPU_OPS_STRICT": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2 3.0"


@pytest.mark.parametrize("dense_dims", [0, 1], ids=["coo", "hybrid"])
@pytest.mark.parametrize("shape", [(3, 4, 5), (4, 5), (1, 4, 5)], ids=str)
def test_sparse_broadcast_to_gives_the_cpus_tensor(dense_dims, shape):
    # Its schema calls the result an alias of the input: it was refused as a
    # view reaching the synchronous path.
    cpu = dense_sample(shape=(1, 5)).to_sparse(2 - dense_dims)
    expected = torch._sparse_broadcast_to(cpu, shape)
    actual = torch._sparse_broadcast_to(cpu.npu(), shape)
    assert actual.device.type == "npu"
    assert_same_sparse(actual, expected)


@pytest.mark.parametrize("mask_layout", [torch.sparse_coo, torch.sparse_csr], ids=str)
@pytest.mark.parametrize("name", ["sum", "amax", "mean", "softmax"])
def test_masked_ops_broadcast_a_sparse_mask_as_on_the_cpu(mask_layout, name):
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(1))
    mask = torch.tensor([[True, False, True, True, False]])
    op = getattr(torch.masked, name)

    def run(device):
        m = mask.to(device)
        return op(x.to(device), 1, mask=m.to_sparse() if mask_layout == torch.sparse_coo else m.to_sparse_csr())

    torch.testing.assert_close(run("npu").cpu(), run("cpu"), equal_nan=True)


SPARSE_VIEWS = {
    "permute": lambda t: t.to_sparse().permute(1, 0),
    "unsqueeze": lambda t: t.to_sparse().unsqueeze(1),
    "view_as_real": lambda t: torch.view_as_real(t.to(torch.complex64).to_sparse()),
    "view_as_complex": lambda t: torch.view_as_complex(torch.stack([t, -t], -1).to_sparse(2)),
    "csr_select_row": lambda t: t.to_sparse_csr().select(0, 2),
    "csr_select_column": lambda t: t.to_sparse_csr().select(1, 3),
}


@pytest.mark.parametrize("name", SPARSE_VIEWS)
def test_sparse_views_give_the_cpus_tensors_sharing_the_inputs_values(name):
    # Their schemas return an alias of the input: as device work they were
    # refused (a copy would lose writes through the view).
    x = dense_sample()
    view = SPARSE_VIEWS[name]
    expected, actual = view(x), view(x.npu())
    assert actual.device.type == "npu"
    torch.testing.assert_close(actual.to_dense().cpu(), expected.to_dense(), rtol=0, atol=0)


def test_a_sparse_views_values_are_the_inputs():
    s = dense_sample().npu().to_sparse()
    s.permute(1, 0)._values().mul_(2)
    torch.testing.assert_close(s.to_dense().cpu(), dense_sample() * 2, rtol=0, atol=0)


@pytest.mark.parametrize("is_coalesced", [None, True, False])
def test_coo_invariant_checks_accept_a_valid_npu_tensor(is_coalesced):
    # The checks flatten the indices (at::sparse::flatten_indices), whose
    # dispatch stub had no npu entry: a valid tensor raised an internal assert.
    indices, values = torch.tensor([[0, 1, 2], [2, 0, 3]]), torch.tensor([1.0, 2.0, 3.0])
    expected = torch.sparse_coo_tensor(indices, values, (3, 4), check_invariants=True, is_coalesced=is_coalesced)
    actual = torch.sparse_coo_tensor(
        indices.npu(), values.npu(), (3, 4), check_invariants=True, is_coalesced=is_coalesced
    )
    assert_same_sparse(actual, expected)


@pytest.mark.parametrize("indices", [[[0, 0], [1, 1]], [[1, 0], [1, 1]]], ids=["duplicate", "unsorted"])
def test_coo_invariant_checks_refuse_uncoalesced_indices_called_coalesced(indices):
    for device in ("cpu", "npu"):
        with pytest.raises(RuntimeError, match="uncoalesced COO tensor"):
            torch.sparse_coo_tensor(
                torch.tensor(indices, device=device), torch.tensor([1.0, 2.0], device=device), (2, 2),
                check_invariants=True, is_coalesced=True,
            )


def test_masked_sum_with_a_broadcast_coo_mask_under_invariant_checks():
    # PyTorch's TestCase turns the checks on: torch.masked with a broadcast
    # COO mask made a coalesced COO tensor on npu and failed there.
    x = torch.randn(3, 2, 1, 2, generator=torch.Generator().manual_seed(2))
    mask = torch.zeros(3, 2, 1, 1, dtype=torch.bool)
    mask[0, 0], mask[1, 1], mask[2, 0] = True, True, True
    with torch.sparse.check_sparse_tensor_invariants():
        expected = torch.masked.sum(x, 1, mask=mask.to_sparse())
        actual = torch.masked.sum(x.npu(), 1, mask=mask.npu().to_sparse())
    torch.testing.assert_close(actual.cpu(), expected)
