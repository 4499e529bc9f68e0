"""The device-module API that Ascend's model-zoo scripts and torch's
device-generic code use: runtime options, peer access, utilization, device
capability, OutOfMemoryError, _initialized, _sleep."""

from __future__ import annotations

import time

import pytest
import torch
import torch_npu


def test_torch_npu_npu_is_torch_npu():
    assert torch_npu.npu is torch.npu
    for name in ("set_compile_mode", "set_option", "config", "matmul", "conv", "utilization",
                 "can_device_access_peer", "get_device_capability", "OutOfMemoryError"):
        assert getattr(torch_npu.npu, name) is getattr(torch.npu, name)
        assert name in torch.npu.__all__


def test_model_zoo_preamble_runs_unchanged():
    # The lines Ascend's model-zoo training scripts start with.
    torch.npu.set_compile_mode(jit_compile=False)
    torch.npu.config.allow_internal_format = False
    torch.npu.matmul.allow_hf32 = True
    torch.npu.conv.allow_hf32 = True
    torch.npu.set_option({"ACL_PRECISION_MODE": "must_keep_origin_dtype"})
    assert torch.npu.is_jit_compile_false()
    assert torch.npu.config.allow_internal_format is False
    assert torch.npu.matmul.allow_hf32 is True and torch.npu.conv.allow_hf32 is True
    torch.npu.set_compile_mode(jit_compile=True)
    assert not torch.npu.is_jit_compile_false()
    torch.npu.set_compile_mode(jit_compile=False)
    torch.npu.matmul.allow_hf32 = False
    assert torch.npu.matmul.allow_hf32 is False


def test_options_are_checked_as_torch_npu_checks_them():
    with pytest.raises(TypeError, match="must be a bool"):
        torch.npu.matmul.allow_hf32 = 1
    with pytest.raises(TypeError, match="must be a bool"):
        torch.npu.conv.allow_hf32 = "yes"
    with pytest.raises(AttributeError, match="allow_hf32"):
        torch.npu.matmul.allow_hf23 = True  # a typo is an error, not a new attribute
    with pytest.raises(TypeError, match="dict"):
        torch.npu.set_option(["ACL_PRECISION_MODE"])
    with pytest.raises(ValueError, match="ACL_PRECISION_MODE must be 'allow_fp32_to_fp16', 'must_keep_origin_dtype'"):
        torch.npu.set_option({"ACL_PRECISION_MODE": "fast"})
    with pytest.raises(ValueError, match="ACL_AICORE_NUM must be an integer from 1 to 32"):
        torch.npu.set_option({"ACL_AICORE_NUM": 64})
    # A rejected dict stores nothing, not even its valid entries.
    before = torch_npu.npu._options.get_option("ACL_OP_DEBUG_LEVEL")
    with pytest.raises(ValueError):
        torch.npu.set_option({"ACL_OP_DEBUG_LEVEL": "2", "ACL_PRECISION_MODE": "x"})
    assert torch_npu.npu._options.get_option("ACL_OP_DEBUG_LEVEL") == before
    torch.npu.set_option({"ACL_AICORE_NUM": 20, "ACL_OP_COMPILER_CACHE_MODE": "enable", "SOME_FUTURE_OPTION": 3})
    assert torch_npu.npu._options.get_option("ACL_AICORE_NUM") == "20"
    assert torch_npu.npu._options.get_option("SOME_FUTURE_OPTION") == "3"


def test_mm_bmm_format_and_cube_math_type():
    torch.npu.set_option({"MM_BMM_ND_ENABLE": "disable"})
    assert torch.npu.get_mm_bmm_format_nd() is False
    torch.npu.set_mm_bmm_format_nd(True)
    assert torch.npu.get_mm_bmm_format_nd() is True
    assert torch.npu.matmul.cube_math_type is None
    torch.npu.matmul.cube_math_type = torch.npu.CubeMathType.USE_HF32
    assert torch.npu.matmul.cube_math_type is torch.npu.CubeMathType.USE_HF32
    with pytest.raises(TypeError, match="CubeMathType"):
        torch.npu.matmul.cube_math_type = 3


def test_hf32_settings_do_not_change_results_on_the_simulator():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    torch.npu.matmul.allow_hf32 = True
    try:
        assert torch.equal((a.npu() @ b.npu()).cpu(), a @ b)
    finally:
        torch.npu.matmul.allow_hf32 = False


def test_peer_access():
    assert torch.npu.can_device_access_peer(0, 1)
    assert torch.npu.can_device_access_peer("npu:1", torch.device("npu", 0))
    assert not torch.npu.can_device_access_peer(0, 0)
    with pytest.raises(RuntimeError, match="Invalid NPU device index npu:99"):
        torch.npu.can_device_access_peer(0, 99)


def test_utilization_measures_device_work():
    device = 2  # a device no other test keeps busy
    x = torch.ones(8, device=f"npu:{device}")
    torch.npu.synchronize(device)
    torch.npu.utilization(device)  # starts a sampling period
    time.sleep(0.2)
    assert torch.npu.utilization(device) <= 5
    with torch.npu.device(device):
        torch.npu._sleep(300 * torch.npu._cycles_per_ms())
        x.add_(1)
    torch.npu.synchronize(device)
    assert torch.npu.utilization(device) >= 70
    assert isinstance(torch.npu.utilization(), int)


def test_get_device_capability_is_none_unless_configured(monkeypatch):
    assert torch.npu.get_device_capability() is None
    monkeypatch.setenv("TORCH_NPU_DEVICE_CAPABILITY", "8.0")
    assert torch.npu.get_device_capability(0) == (8, 0)
    monkeypatch.setenv("TORCH_NPU_DEVICE_CAPABILITY", "eight")
    with pytest.raises(ValueError, match="TORCH_NPU_DEVICE_CAPABILITY='eight' is not of the form 'major.minor'"):
        torch.npu.get_device_capability()


def test_out_of_memory_error_is_torchs():
    assert torch.npu.OutOfMemoryError is torch.OutOfMemoryError
    with pytest.raises(torch.npu.OutOfMemoryError, match="NPU out of memory"):
        torch.empty(1 << 50, dtype=torch.uint8, device="npu")
    torch.ones(4, device="npu")  # the device is still usable


def test_initialized_attribute_for_torchs_device_generic_code():
    # torch.utils.checkpoint and fork_rng read it with getattr(module, "_initialized", False)
    torch.ones(1, device="npu")
    assert torch.npu._initialized is True and torch.npu.is_initialized()
    generator = torch.npu._get_generator(torch.device("npu", 1))
    assert generator is torch.npu.default_generators[1]


def test_initialized_is_false_before_first_use(python_subprocess):
    result = python_subprocess(
        "import torch, torch_npu; print(torch.npu._initialized); torch.ones(1).npu(); print(torch.npu._initialized)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]


def test_sleep_takes_device_clock_cycles_like_torch_cuda():
    start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    start.record()
    torch.npu._sleep(50 * torch.npu._cycles_per_ms())
    end.record()
    end.synchronize()
    assert 45 <= start.elapsed_time(end) < 1000
    with pytest.raises(RuntimeError, match="cycles must be >= 0"):
        torch.npu._sleep(-1)


def test_memory_and_allocator_names_of_torch_npu():
    # torch_npu's torch.npu names that torch.cuda has too: the same answers
    # as the names they stand for.
    for name in ("memory_cached", "max_memory_cached", "reset_max_memory_cached", "memory_stats_as_nested_dict",
                 "memory_snapshot", "host_empty_cache", "host_memory_stats_as_nested_dict",
                 "reset_peak_host_memory_stats", "reset_accumulated_host_memory_stats", "get_allocator_backend",
                 "NPUPluggableAllocator", "change_current_allocator"):
        assert name in torch.npu.__all__ and hasattr(torch.npu, name), name
    keep = torch.empty(1 << 20, device="npu")
    assert torch.npu.memory_cached() == torch.npu.memory_reserved() > 0
    assert torch.npu.max_memory_cached() == torch.npu.max_memory_reserved()
    nested = torch.npu.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == torch.npu.memory_stats()["allocated_bytes.all.current"]
    segments = torch.npu.memory_snapshot()
    assert isinstance(segments, list) and any(s["total_size"] >= keep.nbytes for s in segments)
    with pytest.warns(FutureWarning, match="reset_peak_memory_stats"):
        torch.npu.reset_max_memory_cached()
    del keep
    torch.npu.empty_cache()
    assert torch.npu.max_memory_reserved() >= torch.npu.memory_reserved()
    assert torch.npu.get_allocator_backend() == "native"

    pinned = torch.ones(1 << 16).pin_memory()
    host = torch.npu.host_memory_stats_as_nested_dict()
    assert host["allocated_bytes"]["current"] == torch.npu.host_memory_stats()["allocated_bytes.current"] > 0
    del pinned  # cached by the host allocator until host_empty_cache
    assert torch.npu.host_memory_stats()["allocated_bytes.current"] > 0
    torch.npu.host_empty_cache()
    assert torch.npu.host_memory_stats()["allocated_bytes.current"] == 0
    assert torch.npu.host_memory_stats()["allocated_bytes.peak"] > 0
    torch.npu.reset_peak_host_memory_stats()
    assert torch.npu.host_memory_stats()["allocated_bytes.peak"] == 0
    assert torch.npu.host_memory_stats()["num_host_free"] > 0
    torch.npu.reset_accumulated_host_memory_stats()
    assert torch.npu.host_memory_stats()["num_host_free"] == 0


def test_autocast_state_names_of_torch_npu():
    assert not torch.npu.is_autocast_enabled()
    with torch.autocast("npu", dtype=torch.bfloat16):
        assert torch.npu.is_autocast_enabled() and torch.npu.get_autocast_dtype() == torch.bfloat16
    assert not torch.npu.is_autocast_enabled()
    before = torch.npu.get_autocast_dtype()
    try:
        torch.npu.set_autocast_dtype(torch.bfloat16)
        assert torch.get_autocast_dtype("npu") == torch.bfloat16
        torch.npu.set_autocast_enabled(True)
        assert torch.is_autocast_enabled("npu")
    finally:
        torch.npu.set_autocast_enabled(False)
        torch.npu.set_autocast_dtype(before)


def test_current_blas_handle_says_npu_has_none():
    with pytest.warns(UserWarning, match="NPU does not use blas handle"):
        assert torch.npu.current_blas_handle() is None
