"""torch_npu.contrib.transfer_to_npu: a script written for CUDA runs on npu.

The import patches torch for the rest of the process, so every check runs a
script in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import torch

import torch_npu  # noqa: F401

PRELUDE = """
import json, warnings
import torch
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from torch_npu.contrib import transfer_to_npu
results = {"warned": any("transfer_to_npu" in str(w.message) for w in caught)}
"""


def run(body: str) -> dict:
    """Runs PRELUDE + body in a fresh interpreter; the script fills ``results``."""
    script = PRELUDE + textwrap.dedent(body) + "\nprint('RESULTS=' + json.dumps(results))\n"
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "default"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULTS=")][-1]
    return json.loads(line[len("RESULTS="):])


def test_cuda_script_runs_on_npu():
    r = run(
        """
        # --- a script written for CUDA, unchanged ---
        assert torch.cuda.is_available()
        torch.cuda.manual_seed(0)
        torch.cuda.set_device(0)
        x = torch.randn(2, device="cuda")
        model = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
        model.cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = model(x.unsqueeze(0)).sum()
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        # --- what it ran on ---
        results["x"] = str(x.device)
        results["params"] = sorted({str(p.device) for p in model.parameters()})
        results["grads"] = sorted({str(p.grad.device) for p in model.parameters()})
        results["loss"] = str(loss.device)
        results["finite"] = bool(torch.isfinite(loss).item())
        results["is_cuda"] = x.is_cuda
        """
    )
    assert r["warned"]
    assert r["x"] == "npu:0" and r["loss"] == "npu:0"
    assert r["params"] == ["npu:0"] and r["grads"] == ["npu:0"]
    assert r["finite"]
    assert r["is_cuda"] is False  # tensors stay honest about their device


def test_device_arguments():
    r = run(
        """
        dev = torch.device("cuda")
        results["device"] = [str(dev), str(torch.device("cuda", 1)), str(torch.device("cuda:0")),
                             str(torch.device(type="cuda", index=0)), str(torch.device("cpu"))]
        results["isinstance"] = isinstance(dev, torch.device) and isinstance(torch.device("cpu"), torch.device)
        t = torch.zeros(2)
        results["to"] = [str(t.to("cuda").device), str(t.to("cuda:0").device),
                         str(t.to(dev).device), str(t.to(device="cuda", dtype=torch.half).device),
                         str(t.cuda().device), str(t.cuda(0).device)]
        results["factories"] = [str(f().device) for f in (
            lambda: torch.tensor([1.0], device="cuda"),
            lambda: torch.ones(2, device=torch.device("cuda:0")),
            lambda: torch.arange(3, device="cuda"),
            lambda: torch.full((2,), 1.0, device="cuda"),
            lambda: torch.zeros_like(t, device="cuda"),
            lambda: torch.randint(0, 5, (3,), device="cuda"),
            lambda: t.new_zeros(2, device="cuda"),
        )]
        module = torch.nn.Linear(2, 2).to("cuda")
        results["module_to"] = str(module.weight.device)
        gen = torch.Generator(device="cuda")
        results["generator"] = [str(gen.device), isinstance(gen, torch.Generator)]
        results["device_module"] = torch.get_device_module("cuda").__name__
        results["scaler"] = torch.amp.GradScaler()._device
        """
    )
    assert r["device"] == ["npu", "npu:1", "npu:0", "npu:0", "cpu"]
    assert r["isinstance"]
    assert r["to"] == ["npu:0"] * 6
    assert r["factories"] == ["npu:0"] * 7
    assert r["module_to"] == "npu:0"
    assert r["generator"] == ["npu:0", True]
    assert r["device_module"] == "torch_npu.npu"
    assert r["scaler"] == "npu"


def test_torch_cuda_is_torch_npu():
    r = run(
        """
        names = ["is_available", "device_count", "current_device", "synchronize", "set_device",
                 "Stream", "Event", "stream", "current_stream", "manual_seed", "memory_allocated",
                 "empty_cache", "get_device_name", "get_device_properties"]
        results["same"] = {n: getattr(torch.cuda, n) is getattr(torch.npu, n) for n in names}
        s = torch.cuda.Stream()
        e = torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(s):
            y = torch.ones(4, device="cuda") * 2
            e.record()
        e.synchronize()
        results["stream_result"] = y.sum().item()
        results["count"] = torch.cuda.device_count() == torch.npu.device_count()
        results["allocated"] = torch.cuda.memory_allocated() > 0
        """
    )
    assert all(r["same"].values()), r["same"]
    assert r["stream_result"] == 8.0
    assert r["count"] and r["allocated"]


def test_serialization_and_pickle():
    r = run(
        """
        import copy, io, pickle
        results["pickle"] = str(pickle.loads(pickle.dumps(torch.device("cuda", 0))))
        results["deepcopy"] = str(copy.deepcopy(torch.device("cpu")))
        buf = io.BytesIO()
        torch.save({"t": torch.arange(3.0, device="cuda"), "d": torch.device("cuda")}, buf)
        buf.seek(0)
        loaded = torch.load(buf, map_location="cuda")
        results["load"] = [str(loaded["t"].device), str(loaded["d"])]
        buf.seek(0)
        results["load_dict"] = str(torch.load(buf, map_location={"npu:0": "cpu"})["t"].device)
        """
    )
    assert r["pickle"] == "npu:0"
    assert r["deepcopy"] == "cpu"
    assert r["load"] == ["npu:0", "npu"]
    assert r["load_dict"] == "cpu"


def test_distributed_backend_names():
    r = run(
        """
        import torch.distributed as dist
        results["backends"] = [transfer_to_npu.converted_backend(b) for b in
                               ("nccl", "NCCL", "gloo", "cuda:nccl,cpu:gloo", None)]
        results["wrapped"] = hasattr(dist.init_process_group, "__wrapped__")
        # A gloo group still initialises (the backend name passes unchanged).
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
        results["gloo"] = dist.get_backend()
        dist.destroy_process_group()
        """
    )
    assert r["backends"] == ["hccl", "hccl", "gloo", "npu:hccl,cpu:gloo", None]
    assert r["wrapped"]
    assert r["gloo"] == "gloo"


def test_main_process_is_not_patched():
    # Importing torch_npu (and the ops plugin) does not patch torch.cuda.
    assert torch.cuda.is_available is not torch.npu.is_available
    assert torch.device("cpu").type == "cpu"
    assert type(torch.device) is type


def test_contrib_ships_with_ops_distribution():
    from importlib.metadata import files

    shipped = {str(p).replace("\\", "/") for p in files("torch-npu-ops") or ()}
    assert "torch_npu/contrib/transfer_to_npu.py" in shipped
    assert "torch_npu/ops/custom/_fusion_attention.py" in shipped
