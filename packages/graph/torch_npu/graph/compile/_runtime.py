"""The runtime functions of MLIR that lowered kernels call, built from our
own C source.

Note [Strided copies run in our own memrefCopy]
Bufferization turns an insert into a slice (cat, constant_pad_nd, stack,
block_diag, diag_embed, narrow's backward) into ``memref.copy`` into a
subview of the output. Between contiguous memrefs the copy lowers to
``llvm.memcpy``; otherwise finalize-memref-to-llvm lowers it to a call of
``memrefCopy`` from MLIR's runtime library (mlir_c_runner_utils), which
torch-mlir's wheel does not ship: those kernels could not be linked and ran
their aten ops eagerly (NPUKernelFallbackWarning). Rewriting the copies into
loops before lowering (torch-mlir's refback-munge-memref-copy) gave wrong
results in a cross-entropy kernel of a small Llama, so the copies stay
``memref.copy`` and the call goes to ``_memref_copy.c``, which implements the
same ABI with an element-by-element strided copy. It is compiled once per
kernel cache (in its ``runtime`` folder, apart from the kernels; file names
carry the source's hash): a shared library the JIT of the ExecutionEngine
resolves the symbol against, and an object file each kernel library links
in, so that a cached kernel loads alone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).with_name("_memref_copy.c")
# The functions _memref_copy.c defines; _mlir._check_runtime_calls refuses
# calls into MLIR's runtime other than these.
FUNCTIONS = frozenset({"memrefCopy"})


class RuntimeBuildError(RuntimeError):
    """The runtime functions could not be compiled."""


@dataclass(frozen=True)
class Runtime:
    """The compiled runtime functions: ``shared`` for the JIT, ``object``
    for linking into each kernel library."""

    shared: str
    object: str


def compiler() -> str:
    """The C compiler that builds and links kernels (``$CC``, else cc, gcc
    or clang)."""
    found = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if found is None:
        raise RuntimeBuildError("no C compiler (cc) to build npu kernels; install one or set CC")
    return found


def build(cache: str) -> Runtime:
    """The runtime functions compiled into the ``runtime`` folder of the
    kernel cache ``cache`` (apart from the kernels' libraries; built once:
    the file names carry the source's hash, and files appear by rename, so
    concurrent processes never see half of one)."""
    directory = os.path.join(cache, "runtime")
    os.makedirs(directory, exist_ok=True)
    source = SOURCE.read_bytes()
    tag = hashlib.sha256(source).hexdigest()[:16]
    runtime = Runtime(os.path.join(directory, f"runtime-{tag}.so"), os.path.join(directory, f"runtime-{tag}.o"))
    if os.path.exists(runtime.shared) and os.path.exists(runtime.object):
        return runtime
    cc = compiler()
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        for flags, target in ((["-c"], runtime.object), (["-shared"], runtime.shared)):
            built = os.path.join(tmp, os.path.basename(target))
            result = subprocess.run([cc, "-O2", "-fPIC", *flags, "-o", built, str(SOURCE)],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeBuildError(f"compiling {SOURCE.name} failed: {result.stderr.strip()[:500]}")
            os.replace(built, target)
    return runtime
