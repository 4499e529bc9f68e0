"""`import torch` loads torch_npu and every installed plugin (torch's device
backend autoload), in every process: each rank of a distributed job, each
DataLoader worker. So importing them must not pull in what only some
programs use: Dynamo and Inductor (torch.compile registers npu when they
load, torch_npu/graph/compile/_hook.py), sympy (about 0.5 s), the clients
of the tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# What `import torch` would not import without torch_npu either.
NOT_AT_IMPORT = ("sympy", "torch._dynamo", "torch._inductor", "torch_mlir", "transformers", "matplotlib")


def test_import_torch_with_every_plugin_leaves_the_heavy_modules_unloaded():
    code = (
        "import json, sys, torch, torch_npu\n"
        "import torch_npu.graph, torch_npu.ops, torch_npu.distributed, torch_npu.profiler\n"
        f"print(json.dumps([m for m in {NOT_AT_IMPORT!r} if m in sys.modules]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
