"""CPU kernels running as device work allocate device memory: their
temporaries and results count in the npu memory statistics and capacity."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401


def test_kernel_temporaries_count_in_memory_stats():
    # The CPU convolution allocates its own result (on its first run with
    # this signature it is copied into the output, ResultPlacement.h), and
    # oneDNN a blocked destination before it: the peak shows at least the
    # result beside the output.
    x, w = torch.randn(4, 16, 45, 47).npu(), torch.randn(32, 16, 3, 3).npu()
    torch.npu.synchronize()
    base = torch.npu.memory_allocated()
    torch.npu.reset_peak_memory_stats()
    y = F.conv2d(x, w, padding=1)
    torch.npu.synchronize()
    assert torch.npu.max_memory_allocated() - base >= 2 * y.nbytes
    # Temporaries are freed when the kernel ends: only the output stays.
    # Blocks are multiples of 512 B, large ones (above 1 MiB) of base_addr_aligned_kb (16 KiB by default).
    granule = 16 << 10 if y.nbytes > 1 << 20 else 512
    assert torch.npu.memory_allocated() - base == -(-y.nbytes // granule) * granule
    torch.testing.assert_close(y.cpu(), F.conv2d(x.cpu(), w.cpu(), padding=1))


def test_results_the_host_waits_for_come_back_and_free_their_device_memory():
    x = torch.tensor([0.0, 1.5, 0.0, -2.0]).repeat(1000).npu()
    torch.npu.synchronize()
    base = torch.npu.memory_allocated()
    indices = torch.nonzero(x)  # data-dependent: the host waits
    assert indices.cpu().flatten().tolist()[:4] == [1, 3, 5, 7]
    del indices
    torch.npu.synchronize()
    assert torch.npu.memory_allocated() == base


def test_out_arguments_of_data_dependent_ops_take_their_results():
    # The kernel resizes an empty out= argument, so its result lands in
    # kernel memory first and is moved into the npu argument by device work.
    x = torch.tensor([0.0, 1.5, 0.0, -2.0, 3.0]).repeat(1000)
    expected_values, expected_indices = x[x != 0], torch.nonzero(x)
    xn = x.npu()
    torch.npu.synchronize()
    base = torch.npu.memory_allocated()
    values = torch.empty(0, device="npu")
    indices = torch.empty(0, dtype=torch.long, device="npu")
    torch.masked_select(xn, xn != 0, out=values)
    torch.nonzero(xn, out=indices)
    torch.testing.assert_close(values.cpu(), expected_values, rtol=0, atol=0)
    torch.testing.assert_close(indices.cpu(), expected_indices, rtol=0, atol=0)
    del values, indices
    torch.npu.synchronize()
    assert torch.npu.memory_allocated() == base


def test_out_of_memory_in_a_kernel_is_raised_at_the_call(python_subprocess_env):
    code = """
        import torch, torch_npu, torch.nn.functional as F
        x, w = torch.randn(8, 32, 56, 56).npu(), torch.randn(64, 32, 3, 3).npu()
        try:
            # The first call of a signature waits for its kernel (Note
            # [Errors at the call] in csrc/CallVerification.h): raised here,
            # as CUDA raises it.
            F.conv2d(x, w, padding=1)  # conv line
            print("no error")
        except torch.OutOfMemoryError as error:
            print(error)
        print("afterwards", (x * 2).sum().item() == (x.cpu() * 2).sum().item())
    """
    result = python_subprocess_env(code, {"NPU_SIM_DEVICE_MEMORY": "24MiB"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("NPU out of memory. Tried to allocate")
    assert "for device work (a kernel's temporary or result)" in result.stdout
    assert "afterwards True" in result.stdout


def test_emptying_the_cache_does_not_block_kernels_that_allocate(python_subprocess_env):
    # A host allocation that does not fit drains the device and releases the
    # cache. The queued convolution allocates its temporaries during that
    # drain: the allocator must not be locked meanwhile (it deadlocked).
    code = """
        import torch, torch_npu, torch.nn.functional as F
        x, w = torch.randn(8, 32, 56, 56).npu(), torch.randn(64, 32, 3, 3).npu()
        cached = torch.empty(30 * 2**20, dtype=torch.uint8, device="npu")
        del cached
        torch.npu.synchronize()
        retries = torch.npu.memory_stats()["num_alloc_retries"]
        torch.npu._sleep(100 * torch.npu._cycles_per_ms())
        y = F.conv2d(x, w, padding=1)
        z = torch.empty(50 * 2**20, dtype=torch.uint8, device="npu")  # only fits once the cache is released
        torch.npu.synchronize()
        print("retried", torch.npu.memory_stats()["num_alloc_retries"] - retries)
        torch.testing.assert_close(y.cpu(), F.conv2d(x.cpu(), w.cpu(), padding=1))
        print("ok")
    """
    result = python_subprocess_env(code, {"NPU_SIM_DEVICE_MEMORY": "96MiB"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["retried", "1", "ok"]


def test_kernels_on_two_streams_allocate_at_the_same_time():
    x, w = torch.randn(4, 16, 40, 44), torch.randn(48, 16, 3, 3)  # a 1.3 MB result
    expected = F.conv2d(x, w, padding=1)
    xn, wn = x.npu(), w.npu()
    torch.npu.synchronize()
    results = []
    for stream in (torch.npu.Stream(), torch.npu.Stream()):
        with torch.npu.stream(stream):
            results += [F.conv2d(xn, wn, padding=1) for _ in range(6)]
    torch.npu.synchronize()
    for y in results:
        torch.testing.assert_close(y.cpu(), expected)
