"""Note [Private pools] (csrc/npu/NPUCachingAllocator.h): while a stream
allocates to a private pool, its tensors come from that pool only, blocks
freed into it serve only it (also after the allocation ended), and its
memory goes back to the device once the pool is released."""

from __future__ import annotations

import pytest
import torch

import torch_npu

C = torch_npu._C
MiB = 1 << 20


def _reserved() -> int:
    return torch.npu.memory_reserved()


@pytest.fixture
def pool():
    torch.npu.synchronize()
    torch.npu.empty_cache()
    pool_id = C._npu_graph_pool_handle()
    yield pool_id
    torch.npu.synchronize()
    torch.npu.empty_cache()


def test_graph_pool_handles_are_fresh():
    a, b = C._npu_graph_pool_handle(), C._npu_graph_pool_handle()
    assert a != b and a[0] == 0 and b[0] == 0


def test_a_pool_serves_only_its_own_requests(pool):
    device = torch.npu.current_device()
    C._npu_beginAllocateCurrentStreamToPool(device, pool)
    try:
        inside = torch.empty(3 * MiB, dtype=torch.uint8, device="npu")
        address = inside.data_ptr()
        del inside  # back to the pool, not to the default cache
        # Another stream allocates from the default pool meanwhile.
        with torch.npu.stream(torch.npu.Stream()):
            other = torch.empty(3 * MiB, dtype=torch.uint8, device="npu")
            assert other.data_ptr() != address
            del other
        again = torch.empty(3 * MiB, dtype=torch.uint8, device="npu")
        assert again.data_ptr() == address  # the pool's own block, reused
    finally:
        C._npu_endAllocateToPool(device, pool)
    assert pool in C._npu_privatePoolIds(device)
    del again
    # After the allocation ended: the same stream's default-pool requests
    # do not get the pool's memory.
    outside = torch.empty(3 * MiB, dtype=torch.uint8, device="npu")
    assert outside.data_ptr() != address
    del outside


def _allocate_in(pool, nbytes: int) -> torch.Tensor:
    device = torch.npu.current_device()
    C._npu_beginAllocateCurrentStreamToPool(device, pool)
    try:
        return torch.empty(nbytes, dtype=torch.uint8, device="npu")
    finally:
        C._npu_endAllocateToPool(device, pool)


def test_a_released_pool_gives_its_memory_back(pool):
    device = torch.npu.current_device()
    x = _allocate_in(pool, 24 * MiB)
    with_pool = _reserved()
    del x
    torch.npu.empty_cache()
    assert _reserved() == with_pool  # the pool is still in use: its memory stays
    C._npu_releasePool(device, pool)
    assert _reserved() <= with_pool - 24 * MiB
    assert pool not in C._npu_privatePoolIds(device)


def test_empty_cache_of_one_pool(pool):
    device = torch.npu.current_device()
    x = _allocate_in(pool, 24 * MiB)
    before = _reserved()
    del x
    C._npu_emptyCachePool(pool)
    assert _reserved() <= before - 24 * MiB
    C._npu_releasePool(device, pool)


def test_pool_misuse_is_refused(pool):
    device = torch.npu.current_device()
    with pytest.raises(RuntimeError, match="default pool's id"):
        C._npu_beginAllocateToPool(device, (0, 0))
    with pytest.raises(RuntimeError, match="no allocation to pool"):
        C._npu_endAllocateToPool(device, pool)
    with pytest.raises(RuntimeError, match="has no pool"):
        C._npu_releasePool(device, (0, 987654321))
    with pytest.raises(RuntimeError, match="no npu memory pool"):
        C._npu_emptyCachePool((0, 987654321))
