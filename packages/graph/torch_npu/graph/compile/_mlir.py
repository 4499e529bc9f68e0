"""Compiling an aten program to machine code through MLIR, with a disk cache.

Pipeline: torch-mlir imports the program (torch.export) as
linalg-on-tensors (through its backend IR, where same-width ``view.dtype``
becomes a bitcast: Note [Bitcasts torch-mlir does not lower], _bitcasts.py);
elementwise linalg ops are fused; one-shot bufferization gives memrefs with the identity layout (contiguous tensors), results become
output arguments (buffer-results-to-out-params) and temporaries are freed
(buffer-deallocation-pipeline); linalg becomes affine loops, whose bool
buffers become byte buffers (Note [Bool buffers of a kernel in bytes],
_byte_bools.py), whose strided accesses become scalar (Note [Strided
accesses are not vectorised], _strided_access.py) and which affine-super-vectorize vectorises (LANES lanes, _lanes.py), then everything is lowered to
the LLVM dialect. Before the passes, f32 ``exp`` is spelled out in
arithmetic that vectorises and float reciprocals lose an assert that
would stop the vectoriser (_vectorizable.py, Note [Vectorised exp in MLIR
kernels]), and float64 values become float16 / bfloat16 through float32
(_double_to_half.py, Note [Float64 to half precision through float32]). MLIR's ExecutionEngine compiles it at -O3 and dumps the
object file, which is linked into a shared library in the cache directory.

Parallel lowering (scf.parallel to OpenMP or the async runtime) is not used:
torch-mlir's wheel ships neither runtime library, so a kernel runs on the
one thread that runs the stream's device work; large kernels whose rows are
independent are instead compiled per block of rows and called from several
threads (at most torch.get_num_threads()) (Note [Outer-dimension split of MLIR kernels]).

Note [MLIR kernel cache]
Entries live in ``<Inductor cache dir>/npu_mlir/<key>.so`` with a
``<key>.json`` beside it holding the library's SHA-256. The key hashes the
program, the argument geometry, the pipeline and the torch-mlir version. An
entry whose library is missing, or whose hash does not match, or that fails
to load, is rebuilt with a warning; writes go through a temporary file and a
rename, so a concurrent process never sees half a library.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import hashlib
import json
import os
import subprocess
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from . import _bitcasts, _byte_bools, _in_place, _loop_nests, _runtime, _strided_access
from ._distinct_results import copy_repeated_results
from ._double_to_half import narrow_double_through_float
from ._lanes import LANES
from ._math import MATH_FORMS_VERSION
from ._random_numbers import RANDOM_FORMS_VERSION
from ._vectorizable import drop_float_reciprocal_asserts, expand_f32_exp

# The passes run in three parts: after the fusion, a result returned twice
# becomes a copy (Note [Results that fold into one], _distinct_results.py);
# after the loops are affine loops and before they are vectorised, bool
# buffers become byte buffers (Note [Bool buffers of a kernel in bytes],
# _byte_bools.py) and strided accesses scalar ones (Note [Strided accesses
# are not vectorised], _strided_access.py).
PIPELINE_FUSION = "builtin.module(func.func(linalg-fuse-elementwise-ops,math-expand-ops))"
PIPELINE_TO_LOOPS = (
    "builtin.module("
    "one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{hoist-static-allocs modify-public-functions},"
    "buffer-deallocation-pipeline,"
    "func.func(convert-linalg-to-affine-loops))"
)
PIPELINE_FROM_LOOPS = (
    "builtin.module("
    f"func.func(affine-super-vectorize{{virtual-vector-size={LANES}}},lower-affine),"
    "convert-math-to-llvm,convert-math-to-libm,func.func(convert-vector-to-scf),lower-affine,"
    "convert-scf-to-cf,convert-vector-to-llvm,"
    "expand-strided-metadata,lower-affine,finalize-memref-to-llvm,convert-arith-to-llvm,"
    "convert-cf-to-llvm,convert-func-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts)"
)
PIPELINE = (f"{PIPELINE_FUSION} copy-repeated-results-1 {PIPELINE_TO_LOOPS} {_loop_nests.CACHE_KEY} "  # the cache key
            f"bool-buffers-as-bytes strided-accesses-scalar-1 {PIPELINE_FROM_LOOPS}")
# Rewrites of the imported module before PIPELINE, and of the programs'
# source (Note [Innermost reductions in lanes]) and of its arguments (Note
# [Bool tensors cross the kernel boundary as bytes], kernel.py): part of
# the cache key; so is the version of the functions a program calls
# (_math.scope()), which its source only names.
REWRITES = ("memref-copy-runtime-1", "view-dtype-bitcast-1", "vector-exp-2", "drop-float-reciprocal-asserts-1", f"lane-reductions-{LANES}",
            "bools-as-bytes-1", "double-to-half-through-float-1", "in-place-pairs-1",
            f"math-forms-{MATH_FORMS_VERSION}", f"random-forms-{RANDOM_FORMS_VERSION}")
_FUNC = "kernel"
_lock = threading.Lock()

# Counts for tests and benchmarks: "compiled" (torch-mlir import and
# passes), "loaded" (from the disk cache), "rebuilt" (a corrupt entry).
# The launcher counts launches run as blocks of rows (kernel_stats()).
stats = {"compiled": 0, "loaded": 0, "rebuilt": 0, "compile_seconds": 0.0, "load_seconds": 0.0}


class MLIRUnavailable(RuntimeError):
    """torch-mlir is not installed."""


class MLIRCompileError(RuntimeError):
    """torch-mlir could not import or lower a program."""


def torch_mlir_version() -> str | None:
    """The installed torch-mlir's version, or None without it."""
    try:
        from importlib.metadata import version

        return version("torch-mlir")
    except Exception:
        return None


def cache_dir() -> str:
    """Where compiled kernels are kept (Note [MLIR kernel cache])."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir as inductor_cache_dir

    path = os.path.join(inductor_cache_dir(), "npu_mlir")
    os.makedirs(path, exist_ok=True)
    return path


@dataclass
class CompiledKernel:
    """A loaded kernel: its library (kept alive), its function's address and
    the (input, output) positions that may be one buffer (Note [Outputs
    written over their own inputs], _in_place.py)."""

    library: Any
    address: int
    in_place: frozenset[tuple[int, int]] = frozenset()


def _key(source: str, geometry: Sequence[Any]) -> str:
    text = json.dumps([source, [str(g) for g in geometry], PIPELINE, REWRITES, torch_mlir_version()])
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _load(path: str, in_place: Any = ()) -> CompiledKernel:
    library = ctypes.CDLL(path)
    # The packed wrapper of the C interface: one void** of argument
    # addresses, whatever the number of tensors (csrc/compile/KernelLaunch.cpp).
    address = ctypes.cast(getattr(library, f"_mlir__mlir_ciface_{_FUNC}"), ctypes.c_void_p).value
    # An entry without the pairs (or with a malformed list) has none: its
    # outputs stay staged (Note [Outputs written over their own inputs]).
    pairs = frozenset((int(i), int(j)) for i, j in in_place) if isinstance(in_place, list) else frozenset()
    return CompiledKernel(library, int(address), pairs)


def _lower(module_fn: Callable[..., Any], example_inputs: Sequence[torch.Tensor], object_path: str,
           runtime: _runtime.Runtime, num_outputs: int) -> frozenset[tuple[int, int]]:
    """Compiles the program to ``object_path``; returns the (input, output)
    positions that may be one buffer (Note [Outputs written over their own
    inputs])."""
    try:
        from torch_mlir import fx, ir
        from torch_mlir.compiler_utils import OutputType, lower_mlir_module
        from torch_mlir.dialects import torch as torch_dialect
        from torch_mlir.execution_engine import ExecutionEngine
        from torch_mlir.extras.fx_importer import FxImporter
        from torch_mlir.passmanager import PassManager
    except ImportError as e:
        raise MLIRUnavailable(
            "torch-mlir is not installed; install it with `pip install torch-mlir==20261001` "
            "(torch-npu-graph depends on it where wheels exist)"
        ) from e

    class _Program(torch.nn.Module):
        def forward(self, *inputs: torch.Tensor) -> Any:
            return module_fn(*inputs)

    # MLIR's diagnostics go into the error message (or nowhere, for the
    # remarks of passes that succeed) instead of stderr. The handler is on
    # the context from the start: torch-mlir's import and lowering to
    # linalg report why they fail (an op they cannot legalize) only as
    # diagnostics, and their exception says just "failed with the following
    # diagnostics:".
    diagnostics: list[str] = []

    def collect(diagnostic: Any) -> bool:
        if diagnostic.severity == ir.DiagnosticSeverity.ERROR:
            diagnostics.append(str(diagnostic.message))
        return True

    context = ir.Context()
    torch_dialect.register_dialect(context)
    context.attach_diagnostic_handler(collect)
    try:
        with warnings.catch_warnings():
            # torch.export deep-copies its tree specs, and torch 2.13 warns
            # about its own LeafSpec check at each copy: at every kernel
            # compile, and as an error (so a fallback) under -W error.
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning)
            module = fx.export_and_import(_Program(), *example_inputs, fx_importer=FxImporter(context=context),
                                          output_type=OutputType.TORCH, func_name=_FUNC)
        bitcasts = _bitcasts.has_bitcasts(str(module))
        if bitcasts:
            module = _bitcasts.rewrite(module)  # Note [Bitcasts torch-mlir does not lower]
        lower_mlir_module(False, OutputType.LINALG_ON_TENSORS, module)
        if bitcasts:
            module = _bitcasts.bitcasts_as_loops(module)
        with module.context:
            for op in module.body.operations:
                op.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            expand_f32_exp(module)
            drop_float_reciprocal_asserts(module)
            # Note [Float64 to half precision through float32]
            narrow_double_through_float(module)
            PassManager.parse(PIPELINE_FUSION).run(module.operation)
            # Note [Results that fold into one]
            copy_repeated_results(module)
            elementwise = _loop_nests.is_elementwise(str(module))
            PassManager.parse(PIPELINE_TO_LOOPS).run(module.operation)
            # Note [One loop nest for an elementwise kernel's results]
            if elementwise and _loop_nests.accesses_whole_buffers(str(module)):
                PassManager.parse(_loop_nests.PIPELINE).run(module.operation)
            # Note [Bool buffers of a kernel in bytes]
            module = _byte_bools.rewrite(module)
            # Note [Strided accesses are not vectorised]
            module = _strided_access.rewrite(module)
            # Note [Outputs written over their own inputs]
            in_place = _in_place.in_place_pairs(str(module), len(example_inputs), num_outputs)
            PassManager.parse(PIPELINE_FROM_LOOPS).run(module.operation)
            if in_place and _in_place.has_noalias(str(module)):
                in_place = frozenset()
        # Note [Strided copies run in our own memrefCopy]
        engine = ExecutionEngine(module, opt_level=3, shared_libs=[runtime.shared], enable_object_dump=True)
        engine.dump_to_object_file(object_path)
        if not os.path.exists(object_path):
            # The JIT printed why (e.g. "Symbols not found") and dumped nothing.
            raise MLIRCompileError("the JIT could not compile it (no object file; see its message on stderr)")
        return in_place
    except _byte_bools.ByteBoolsError as e:
        raise MLIRCompileError(f"its bool buffers cannot be kept in bytes ({e})") from e
    except _strided_access.StridedAccessError as e:
        raise MLIRCompileError(f"its strided accesses cannot be kept out of vector loops ({e})") from e
    except Exception as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        # The first error is the cause; later ones are its consequences.
        detail = f": {diagnostics[0][:500]}" if diagnostics else ""
        raise MLIRCompileError(first_line.rstrip(":") + detail) from e


def _link(object_path: str, library_path: str, runtime: _runtime.Runtime) -> None:
    # The runtime functions go into each library (Note [Strided copies run
    # in our own memrefCopy]), so that a cached kernel loads alone.
    result = subprocess.run([_runtime.compiler(), "-shared", "-o", library_path, object_path, runtime.object, "-lm"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise MLIRCompileError(f"linking the kernel failed: {result.stderr.strip()[:500]}")


def get_kernel(name: str, source: str, geometry: Sequence[Any], module_fn: Callable[..., Any],
               example_inputs: Callable[[], Sequence[torch.Tensor]], num_outputs: int = 0) -> CompiledKernel:
    """The compiled kernel for ``source`` at ``geometry``, from the disk cache
    or compiled now (Note [MLIR kernel cache])."""
    key = _key(source, geometry)
    directory = cache_dir()
    library_path = os.path.join(directory, f"{key}.so")
    meta_path = os.path.join(directory, f"{key}.json")
    with _lock:
        if os.path.exists(library_path) or os.path.exists(meta_path):
            start = time.perf_counter()
            problem = None
            try:
                with open(meta_path) as f:
                    meta = json.load(f)
                if meta.get("sha256") != _sha256(library_path):
                    problem = "its checksum does not match"
                else:
                    kernel = _load(library_path, meta.get("in_place"))
                    stats["loaded"] += 1
                    stats["load_seconds"] += time.perf_counter() - start
                    return kernel
            except (OSError, ValueError, AttributeError) as e:
                problem = str(e).splitlines()[0] if str(e) else type(e).__name__
            warnings.warn(f"npu kernel cache: the entry of {name} ({library_path}) is corrupt "
                          f"({problem}); recompiling it", RuntimeWarning, stacklevel=3)
            stats["rebuilt"] += 1
        start = time.perf_counter()
        try:
            runtime = _runtime.build(directory)
        except _runtime.RuntimeBuildError as e:
            raise MLIRCompileError(str(e)) from e
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            object_path = os.path.join(tmp, "kernel.o")
            # In a thread of its own: the kernel's first run happens inside a
            # compiled region, whose dispatch modes (functionalization,
            # fake tensors) and Dynamo frame hook are thread-local and must
            # not see torch.export's tracing.
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                in_place = pool.submit(_lower, module_fn, example_inputs(), object_path, runtime,
                                       num_outputs).result()
            tmp_library = os.path.join(tmp, "kernel.so")
            _link(object_path, tmp_library, runtime)
            with open(os.path.join(tmp, "kernel.json"), "w") as f:
                json.dump({"name": name, "sha256": _sha256(tmp_library), "in_place": sorted(in_place)}, f)
            os.replace(tmp_library, library_path)
            os.replace(os.path.join(tmp, "kernel.json"), meta_path)
        stats["compiled"] += 1
        stats["compile_seconds"] += time.perf_counter() - start
        return _load(library_path, [list(pair) for pair in sorted(in_place)])
