"""Building a C++ program against torch_npu's CMake packages.

A libtorch program that uses npu (the runtime, the ops' kernels, the HCCL
process group) finds torch_npu's CMake packages (TorchNPUCore, TorchNPUOps,
TorchNPUDistributed) under each package's ``cmake_prefix_path``. This module
configures and builds such a project the way the tests and examples do:
Ninja and ccache when the environment has them, a Release build, and an
error that carries CMake's own output when a step fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterable

__all__ = ["CMakeBuildError", "build_cmake_project"]


class CMakeBuildError(RuntimeError):
    """Configuring or building a CMake project failed; the message holds CMake's output."""


def _tool(name: str) -> str | None:
    # The environment's own tools first (./dev installs cmake and ninja into .venv).
    return shutil.which(name, path=str(Path(sys.prefix) / "bin")) or shutil.which(name)


def build_cmake_project(source: Path, build: Path, prefix_paths: Iterable[str], target: str) -> Path:
    """Configures ``source`` into ``build`` with ``CMAKE_PREFIX_PATH`` set to
    ``prefix_paths`` (e.g. ``[torch_npu.ops.cmake_prefix_path]``), builds it,
    and returns the path of the executable ``target``.

    Raises :class:`CMakeBuildError` (with CMake's output) when cmake is missing
    or a step fails.
    """
    cmake = _tool("cmake")
    if cmake is None:
        raise CMakeBuildError("cmake was not found: install it (`pip install cmake`; ./dev setup does)")
    options = [f"-DCMAKE_PREFIX_PATH={';'.join(prefix_paths)}", "-DCMAKE_BUILD_TYPE=Release"]
    ninja = _tool("ninja")
    if ninja is not None:
        options += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"]
    env = None
    if shutil.which("ccache"):
        options.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
        # Paths below the folder holding both trees are hashed relative to
        # it, so that the same project built in another temporary folder
        # (each test run makes new ones) hits the cache; a CCACHE_BASEDIR
        # that holds both already does that.
        trees = [Path(source).resolve(), Path(build).resolve()]
        common = os.path.commonpath(trees)
        base = os.environ.get("CCACHE_BASEDIR")
        if common != os.path.sep and not (base and os.path.commonpath([base, *trees]) == base):
            env = {**os.environ, "CCACHE_BASEDIR": common}
    steps = (("configuring", [cmake, "-S", str(source), "-B", str(build), *options]),
             ("building", [cmake, "--build", str(build)]))
    for what, command in steps:
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise CMakeBuildError(f"{what} {source} failed (exit code {done.returncode}):\n"
                                  f"{done.stdout}{done.stderr}")
    return Path(build) / target
