"""Pinned host memory and asynchronous copies."""

from __future__ import annotations

import torch

import torch_npu  # noqa: F401


def test_pin_memory_and_is_pinned_with_interior_pointers():
    host = torch.arange(1024.0).pin_memory()
    assert host.is_pinned()
    assert host[100:].is_pinned()  # an interior pointer of a pinned block
    assert not torch.arange(4.0).is_pinned()
    stats = torch.npu.host_memory_stats()
    assert stats["allocations.current"] >= 1
    assert stats["allocated_bytes.current"] >= 4096


def test_pinned_block_is_reused_after_free():
    a = torch.empty(1000).pin_memory()
    ptr = a.data_ptr()
    del a
    b = torch.empty(1000).pin_memory()
    assert b.data_ptr() == ptr


def test_non_blocking_h2d_from_pinned_memory_is_asynchronous():
    host = torch.full((1 << 20,), 5.0).pin_memory()
    dst = torch.empty(1 << 20, device="npu")
    torch.npu._sleep(200 * torch.npu._cycles_per_ms())
    dst.copy_(host, non_blocking=True)
    done = torch.npu.current_stream().record_event()
    assert not done.query()  # copy_ returned while the copy was still queued
    done.synchronize()
    assert dst.cpu().eq(5).all()


def test_non_blocking_d2h_into_pinned_memory_is_asynchronous():
    src = torch.full((1 << 16,), 3.0).npu()
    host = torch.empty(1 << 16).pin_memory()
    torch.npu._sleep(200 * torch.npu._cycles_per_ms())
    host.copy_(src, non_blocking=True)
    assert not torch.npu.current_stream().query()
    torch.npu.current_stream().synchronize()
    assert host.eq(3).all()


def test_pageable_copies_complete_before_returning():
    src = torch.full((4096,), 2.0)
    dst = torch.empty(4096, device="npu")
    torch.npu._sleep(50 * torch.npu._cycles_per_ms())
    dst.copy_(src, non_blocking=True)  # pageable: synchronous, like CUDA
    src.fill_(9.0)
    assert dst.cpu().eq(2).all()


def test_pinned_source_reused_only_after_the_copy():
    # A pinned buffer freed right after an async copy must not be handed out
    # again (and overwritten) before the copy has read it.
    dst = torch.empty(4096, device="npu")
    torch.npu._sleep(150 * torch.npu._cycles_per_ms())
    src = torch.full((4096,), 1.0).pin_memory()
    ptr = src.data_ptr()
    dst.copy_(src, non_blocking=True)
    del src
    other = torch.empty(4096).pin_memory()
    assert other.data_ptr() != ptr
    other.fill_(7.0)
    torch.npu.synchronize()
    assert dst.cpu().eq(1).all()
