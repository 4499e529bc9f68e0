"""Under torch.use_deterministic_algorithms(True), empty*, and resize_ where
it grows the storage, fill the new memory with NaN or the dtype's largest
value, as on the CPU (Note [Deterministic mode fills new npu memory]).
npu handed out whatever the caching allocator's block held."""

from __future__ import annotations

import pytest
import torch
import torch_npu  # noqa: F401
from torch.testing._internal.common_utils import DeterministicGuard

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.int32, torch.uint8, torch.bool]

FACTORIES = {
    "empty": lambda dtype, device: torch.empty(3, 4, dtype=dtype, device=device),
    "empty_strided": lambda dtype, device: torch.empty_strided((3, 4), (1, 3), dtype=dtype, device=device),
    "empty_like": lambda dtype, device: torch.empty_like(torch.zeros(3, 4, dtype=dtype, device=device)),
    "empty_permuted": lambda dtype, device: torch.empty_permuted((2, 3, 2), (1, 0, 2), dtype=dtype, device=device),
    "empty_out": lambda dtype, device: torch.empty(3, 4, out=torch.zeros(1, dtype=dtype, device=device)),
}


def _as_comparable(t):
    # NaN compares unequal: compare the bytes of the values.
    return t.cpu().contiguous().view(torch.uint8) if t.dtype != torch.bool else t.cpu()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("factory", FACTORIES)
def test_new_memory_holds_what_the_cpu_fills_in(factory, dtype):
    # A block that held other values first: the allocator hands it out again.
    torch.full((64,), 7, dtype=torch.int64, device="npu")
    with DeterministicGuard(True):
        expected = FACTORIES[factory](dtype, "cpu")
        result = FACTORIES[factory](dtype, "npu")
    assert result.shape == expected.shape and result.stride() == expected.stride()
    assert torch.equal(_as_comparable(result), _as_comparable(expected))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_resize_fills_only_the_bytes_the_storage_grew_by(dtype):
    with DeterministicGuard(True):
        expected = torch.ones(2, 3, dtype=dtype).resize_(4, 3)
        result = torch.ones(2, 3, dtype=dtype, device="npu").resize_(4, 3)
    assert torch.equal(_as_comparable(result), _as_comparable(expected))

