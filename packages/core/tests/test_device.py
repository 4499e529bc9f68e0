"""Devices: discovery, selection, properties, per-thread state, bad indices."""

from __future__ import annotations

import pickle
import threading

import pytest
import torch

import torch_npu

INVALID = "Invalid NPU device index npu:"


def test_registered_as_npu():
    assert torch._C._get_privateuse1_backend_name() == "npu"
    assert torch.npu is torch_npu.npu
    assert torch.npu.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("npu")


def test_default_device_count_is_eight():
    assert torch.npu.device_count() == 8
    assert torch.accelerator.device_count() == 8


def test_device_name_says_simulated():
    name = torch.npu.get_device_name(0)
    assert "simulated" in name
    props = torch.npu.get_device_properties(0)
    assert props.name == name
    assert props.total_memory > 0
    assert props.cube_core_num > 0 and props.vector_core_num > 0
    assert "total_memory=" in repr(props)


def test_set_device_and_context_manager():
    assert torch.npu.current_device() == 0
    with torch.npu.device(3):
        assert torch.npu.current_device() == 3
        t = torch.empty(2, device="npu")
        assert t.device == torch.device("npu", 3)
        with torch.npu.device_of(torch.empty(1, device="npu:5")):
            assert torch.npu.current_device() == 5
        assert torch.npu.current_device() == 3
    assert torch.npu.current_device() == 0


def test_current_device_is_per_thread():
    torch.npu.set_device(1)
    seen = {}

    def worker():
        seen["initial"] = torch.npu.current_device()
        torch.npu.set_device(6)
        seen["after"] = torch.npu.current_device()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    try:
        assert seen == {"initial": 0, "after": 6}
        assert torch.npu.current_device() == 1
    finally:
        torch.npu.set_device(0)


@pytest.mark.parametrize(
    "action",
    [
        lambda: torch.npu.set_device(8),
        lambda: torch.empty(2, device="npu:8"),
        lambda: torch.zeros(2).to("npu:9"),
        lambda: torch.Generator(device="npu:8"),
        lambda: torch.npu.Stream(device=8),
        lambda: torch.npu.memory_allocated(8),
        lambda: torch.npu.get_device_properties(42),
    ],
    ids=["set_device", "factory", "to", "generator", "stream", "memory", "properties"],
)
def test_invalid_device_index_has_one_message(action):
    with pytest.raises(RuntimeError, match=INVALID):
        action()
    # The process keeps working.
    assert torch.ones(1).npu().cpu().item() == 1.0


def test_invalid_index_in_map_location(tmp_path):
    path = tmp_path / "t.pt"
    torch.save(torch.arange(4.0).npu(), path)
    with pytest.raises(RuntimeError, match=INVALID):
        torch.load(path, map_location="npu:12")


def test_is_bf16_supported_and_capability():
    assert torch.npu.is_bf16_supported()
    assert torch.npu.get_device_capability(0) is None


def test_synchronize_every_way():
    torch.npu.synchronize()
    torch.npu.synchronize(2)
    torch.npu.synchronize("npu:1")
    torch.accelerator.synchronize()


def test_legacy_tensor_types():
    t = torch.npu.FloatTensor(2, 3)
    assert t.shape == (2, 3) and t.dtype == torch.float32 and t.device.type == "npu"
    assert isinstance(t, torch.npu.FloatTensor)
    assert not isinstance(t, torch.npu.LongTensor)
    data = torch.npu.LongTensor([1, 2, 3])
    assert data.cpu().tolist() == [1, 2, 3]
    assert not isinstance(torch.ones(2), torch.npu.FloatTensor)


def test_generated_methods():
    t = torch.ones(3).npu()
    assert t.is_npu
    assert t.device == torch.device("npu:0")
    assert torch.ones(2).npu(4).device == torch.device("npu:4")
    module = torch.nn.Linear(2, 2).npu()
    assert module.weight.device.type == "npu"
    assert module.weight.is_npu
    assert torch.UntypedStorage(8).npu().device.type == "npu"


def test_save_and_load_map_locations(tmp_path):
    path = tmp_path / "t.pt"
    src = torch.arange(6, dtype=torch.float32).reshape(2, 3).npu(1)
    torch.save({"t": src}, path)
    assert torch.load(path)["t"].device == torch.device("npu:1")
    assert torch.load(path, map_location="cpu")["t"].tolist() == [[0, 1, 2], [3, 4, 5]]
    loaded = torch.load(path, map_location="npu:3")["t"]
    assert loaded.device == torch.device("npu:3")
    assert torch.equal(loaded.cpu(), src.cpu())
    assert torch.load(path, map_location="npu")["t"].device.type == "npu"
    # Pickling tensors goes through the same storage path.
    assert torch.equal(pickle.loads(pickle.dumps(src)).cpu(), src.cpu())


def test_device_environment_variables(python_subprocess):
    result = python_subprocess(
        "import torch, torch_npu; print(torch.npu.device_count())",
        env={"ASCEND_RT_VISIBLE_DEVICES": "2,5", "NPU_SIM_DEVICE_COUNT": "8"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2"
    result = python_subprocess(
        "import torch, torch_npu; print(torch.npu.device_count())",
        env={"NPU_SIM_DEVICE_COUNT": "3"},
    )
    assert result.stdout.strip() == "3", result.stderr


def test_no_threads_before_device_use(python_subprocess):
    code = """
        import os, threading
        def native_threads():
            return len(os.listdir('/proc/self/task'))
        import torch
        before = native_threads()
        import torch_npu
        torch.npu.device_count(); torch.npu.is_available(); torch.npu.get_device_name(0)
        torch.npu.memory_allocated(0)
        after_queries = native_threads()
        x = torch.ones(4).npu()
        after_use = native_threads()
        print(before, after_queries, after_use)
    """
    result = python_subprocess(code, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert result.returncode == 0, result.stderr
    before, after_queries, after_use = map(int, result.stdout.split())
    assert after_queries == before
    assert after_use > after_queries


def test_no_device_fails_with_the_clear_message_only(python_subprocess):
    # No restore warning with a C++ backtrace before it (the guard used to
    # warn while unwinding), and no backtrace in the error: as torch.cuda.
    code = """
        import warnings, torch, torch_npu
        warnings.simplefilter("always")
        for make in (lambda: torch.zeros(2, device="npu"), lambda: torch.ones(2).npu(),
                     lambda: torch.empty(3, device="npu").fill_(1)):
            try:
                make()
            except RuntimeError as error:
                print("ERROR", str(error).splitlines()[0])
    """
    result = python_subprocess(code, env={"NPU_SIM_DEVICE_COUNT": "0"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and all("this process sees 0 NPU devices" in line for line in lines), lines
    assert "Warning" not in result.stderr and "frame #" not in result.stderr + result.stdout, result.stderr
