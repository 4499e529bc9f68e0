"""torch.npu.memory.NPUPluggableAllocator and change_current_allocator
(Note [Pluggable allocators] in NPUPluggableAllocator.h). The allocator is a
small C file built with the system compiler; each case runs in a fresh
process, since the allocator can be changed only once, before the first
npu tensor."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

# Takes device memory from the runtime (the simulator's aclrtMalloc, found in
# the process) and counts what it gives out, so the test can compare.
ALLOCATOR_C = r"""
#include <stddef.h>
#include <sys/types.h>

typedef int (*malloc_fn)(void**, size_t, int);
typedef int (*free_fn)(void*);

long allocs = 0, frees = 0;
ssize_t live_bytes = 0;
static malloc_fn runtime_malloc;
static free_fn runtime_free;

void set_runtime(void* m, void* f) { runtime_malloc = (malloc_fn)m; runtime_free = (free_fn)f; }

void* my_alloc(ssize_t size, int device, void* stream) {
  void* ptr = NULL;
  if (runtime_malloc(&ptr, (size_t)size, 0) != 0) return NULL;
  allocs++; live_bytes += size;
  return ptr;
}

void my_free(void* ptr, ssize_t size, int device, void* stream) {
  runtime_free(ptr);
  frees++; live_bytes -= size;
}
"""

# Hands the C file the runtime's aclrtMalloc / aclrtFree (the simulator's,
# or CANN's), from the library torch_npu loaded.
SET_RUNTIME = """
def set_runtime(so):
    runtime = ctypes.CDLL(torch_npu._C._backend_info()["library"])
    address = lambda name: ctypes.cast(getattr(runtime, name), ctypes.c_void_p).value
    ctypes.CDLL(so).set_runtime(ctypes.c_void_p(address("aclrtMalloc")), ctypes.c_void_p(address("aclrtFree")))
"""


@pytest.fixture(scope="module")
def allocator_so(tmp_path_factory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    directory = tmp_path_factory.mktemp("pluggable")
    source = directory / "alloc.c"
    source.write_text(ALLOCATOR_C)
    so = directory / "liballoc.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(so), str(source)], check=True)
    return so


def run(python_subprocess, code: str) -> list[str]:
    result = python_subprocess("import ctypes, torch, torch_npu\nfrom torch_npu.npu import memory\n" + SET_RUNTIME + code)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("\n")


def test_tensors_use_the_pluggable_allocator(python_subprocess, allocator_so):
    out = run(python_subprocess, f"""
so = {str(allocator_so)!r}
set_runtime(so)
memory.change_current_allocator(memory.NPUPluggableAllocator(so, "my_alloc", "my_free"))
lib = ctypes.CDLL(so)
x = torch.arange(1000, dtype=torch.float32, device="npu")
y = x * 2
print(ctypes.c_long.in_dll(lib, "allocs").value >= 2, ctypes.c_ssize_t.in_dll(lib, "live_bytes").value >= 8000)
print(float(y.sum().cpu()), torch.npu.memory_allocated())
del x, y
torch.npu.synchronize()
import gc, time
gc.collect()
for _ in range(100):
    if ctypes.c_ssize_t.in_dll(lib, "live_bytes").value == 0:
        break
    time.sleep(0.01)
print(ctypes.c_ssize_t.in_dll(lib, "live_bytes").value, ctypes.c_long.in_dll(lib, "allocs").value == ctypes.c_long.in_dll(lib, "frees").value)
""")
    assert out[0] == "True True"
    assert out[1] == f"{2.0 * sum(range(1000))} 0"  # the caching allocator holds nothing
    assert out[2] == "0 True"


def test_missing_library_or_symbol_is_a_clear_error(python_subprocess, allocator_so, tmp_path):
    out = run(python_subprocess, f"""
def error_of(fn):
    try:
        fn()
    except Exception as e:
        return f"{{type(e).__name__}}: {{e}}"
    return "no error"
print(error_of(lambda: memory.NPUPluggableAllocator({str(tmp_path / "missing.so")!r}, "a", "f")))
print(error_of(lambda: memory.NPUPluggableAllocator({str(allocator_so)!r}, "my_alloc", "nope")))
print(error_of(lambda: memory.change_current_allocator(object())))
# Nothing changed: the caching allocator still serves.
t = torch.ones(4, device="npu")
print(float(t.sum().cpu()), torch.npu.memory_allocated() > 0)
""")
    assert out[0].startswith("FileNotFoundError: NPUPluggableAllocator: no shared library at")
    assert out[1].startswith("AttributeError: NPUPluggableAllocator:") and "'nope'" in out[1]
    assert out[2].startswith("TypeError: change_current_allocator: expected")
    assert out[3] == "4.0 True"


def test_changing_after_the_first_allocation_is_refused(python_subprocess, allocator_so):
    out = run(python_subprocess, f"""
t = torch.ones(4, device="npu")
try:
    memory.change_current_allocator(memory.NPUPluggableAllocator({str(allocator_so)!r}, "my_alloc", "my_free"))
except RuntimeError as e:
    print(str(e).splitlines()[0])
u = torch.ones(4, device="npu")
print(float((t + u).sum().cpu()), torch.npu.memory_allocated() > 0)
""")
    assert "has already allocated npu memory" in out[0]
    assert out[1] == "8.0 True"


def test_changing_twice_and_private_pools_are_refused(python_subprocess, allocator_so):
    out = run(python_subprocess, f"""
set_runtime({str(allocator_so)!r})
a = memory.NPUPluggableAllocator({str(allocator_so)!r}, "my_alloc", "my_free")
memory.change_current_allocator(a)
try:
    memory.change_current_allocator(a)
except RuntimeError as e:
    print(str(e).splitlines()[0])
try:
    torch.npu.MemPool()
except RuntimeError as e:
    print(str(e).splitlines()[0])
print(float(torch.ones(3, device="npu").sum().cpu()))
""")
    assert "is installed already" in out[0]
    assert "needs the NPU caching allocator" in out[1]
    assert out[2] == "3.0"
