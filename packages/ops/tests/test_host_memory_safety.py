"""Device work never touches host memory it does not own.

An npu op given a CPU `out=` or a non-scalar CPU input must refuse at the
call ("Expected all tensors to be on the same device", as CUDA does): device
work that wrote into a host tensor would do so asynchronously, after Python
may have freed it. This runs every OpInfo with an out= variant, and the mixed
inputs of common ops, in a loop in a fresh process under the simulator's
memory checker and glibc's heap checks (MALLOC_CHECK_=3 aborts on a corrupted
heap, MALLOC_PERTURB_ fills freed memory), and requires every call to be
refused at the call and the process to end cleanly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = """
import gc, warnings
warnings.simplefilter("ignore")
import torch, torch_npu
from torch.testing._internal.common_methods_invocations import op_db

SAME_DEVICE = "Expected all tensors to be on the same device"
refused = accepted = 0
odd = []

def expect_refusal(name, call):
    global refused, accepted
    try:
        call()
    except RuntimeError as e:
        # CUDA's message, or an op's own naming both devices ("quantile() out
        # tensor must be on the same device as the input tensor", "Expected
        # out tensor to have device npu:0, but got cpu instead").
        message = str(e).lower()
        if SAME_DEVICE in str(e) or "same device" in message or ("npu" in message and "cpu" in message):
            refused += 1
            return
        odd.append((name, str(e).splitlines()[0][:120]))
        return
    accepted += 1
    odd.append((name, "accepted"))

def npu(x):
    if isinstance(x, (list, tuple)):
        return type(x)(npu(y) for y in x)
    return x.npu() if isinstance(x, torch.Tensor) else x

def has_tensor(x):
    if isinstance(x, (list, tuple)):
        return any(has_tensor(y) for y in x)
    return isinstance(x, torch.Tensor)

# Every OpInfo with an out= variant: npu inputs, a CPU out.
for op in op_db:
    if not op.supports_out or torch.float32 not in op.supported_dtypes("cpu"):
        continue
    try:
        sample = next(iter(op.sample_inputs("cpu", torch.float32)))
        expected = op(sample.input, *sample.args, **sample.kwargs)
    except Exception:
        continue  # nothing to call it with on the CPU either
    if not isinstance(expected, torch.Tensor) or expected.numel() == 0:
        continue
    if not has_tensor([sample.input, list(sample.args), list(sample.kwargs.values())]):
        continue  # a factory (arange, ...): nothing on npu, a CPU out is its own device
    args = [npu(a) for a in sample.args]
    kwargs = {k: npu(v) for k, v in sample.kwargs.items()}
    for _ in range(3):
        out = torch.empty_like(expected)  # on the CPU: freed right after the call
        expect_refusal(op.name, lambda: op(npu(sample.input), *args, out=out, **kwargs))
        del out

# The classic case, many times: npu inputs, a fresh CPU out each call.
a, b = torch.randn(1 << 14).npu(), torch.randn(1 << 14).npu()
for _ in range(2000):
    expect_refusal("add.out", lambda: torch.add(a, b, out=torch.empty(1 << 14)))

# Mixed inputs: one npu and one non-scalar CPU tensor.
m, v = torch.randn(64, 64), torch.randn(64)
for _ in range(200):
    expect_refusal("add", lambda: torch.add(m.npu(), m))
    expect_refusal("mul", lambda: m.npu() * m)
    expect_refusal("mm", lambda: torch.mm(m.npu(), m))
    expect_refusal("dot", lambda: torch.dot(v.npu(), v))
    expect_refusal("add_", lambda: m.npu().add_(m))
    expect_refusal("copy_ into a CPU out of an npu op", lambda: torch.mul(v.npu(), 2, out=torch.empty(64)))

# 0-dim CPU tensors stay allowed, as on CUDA.
s = torch.tensor(3.0)
assert torch.equal((v.npu() * s).cpu(), v * s)

gc.collect()
torch.npu.synchronize()
print(refused, accepted, odd)
"""


def test_npu_ops_refuse_host_memory_at_the_call_under_heap_checks():
    env = {**os.environ, "NPU_SIM_CHECKER": "1", "MALLOC_CHECK_": "3", "MALLOC_PERTURB_": "165"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}"
    refused, accepted, odd = done.stdout.split(" ", 2)
    # Every call refused, none accepted or failing otherwise; and many of them.
    assert int(accepted) == 0 and odd.strip() == "[]", done.stdout
    assert int(refused) > 2000 + 6 * 200 + 3 * 250, done.stdout
