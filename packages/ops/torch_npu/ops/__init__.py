"""torch_npu.ops: ATen kernels for npu (the torch-npu-ops plugin).

Loaded by torch_npu at import through the ``torch_npu.plugins`` entry point.
From then on every ATen op runs on npu tensors as device work; see
:func:`execution_counters` for how many ran asynchronously. Autocast
kernels for npu load with it, and its initialiser provides ``torch.npu.amp``
(:mod:`torch_npu.ops.amp`).
"""

from __future__ import annotations

import os
import sys
import warnings
from types import ModuleType

import torch

from torch_npu._plugins import check_plugin_build

from . import _build_info

__version__ = "0.1.0"

#: The CMAKE_PREFIX_PATH entry of this package's CMake package:
#: ``find_package(TorchNPUOps)`` gives ``torch_npu::torch_npu_ops``, whose
#: linking gives a C++ program the npu kernels (see README.md).
cmake_prefix_path: str = os.path.join(os.path.dirname(__file__), "share", "cmake")

# Before the extension loads: built for another core or torch, it would fail
# with undefined symbols, or misbehave.
check_plugin_build("torch-npu-ops", __version__, _build_info.BUILT_WITH_CORE,
                   _build_info.BUILT_WITH_TORCH)

from . import _C  # noqa: E402

_C._install()


def execution_counters() -> dict[str, int]:
    """How many ops ran on each path: ``device_async`` (queued, the host did
    not wait) and ``device_sync`` (data-dependent results: the host waited).
    ``fast_path`` counts the part of ``device_async`` that dedicated kernels
    queued (pointwise ops, reductions, matrix products, softmax, layer and
    batch norm) without the generic executor's per-op overhead.
    ``results_copied`` and ``results_placed`` count how the generic executor
    delivered the results of ops without an out= kernel: copied from the CPU
    kernel's allocation into the npu output, or computed in the output's
    memory (large results, from the second run of an op signature on).
    ``replay_kernels`` and ``replay_aliases`` count the dedicated kernels'
    work items that ran again (replays of a captured graph) and kept their
    prepared CPU kernel, or only their CPU views of device memory, for the
    runs after; ``replay_kernels_dropped`` those that gave a prepared kernel
    up after a run (Note [Prepared kernels of replayed work])."""
    return dict(_C._execution_counters())


def synchronous_ops() -> dict[str, int]:
    """Op name -> how often it ran on the synchronous path."""
    return dict(_C._sync_ops())


def reset_execution_counters() -> None:
    """Sets the counters of :func:`execution_counters` back to zero."""
    _C._reset_execution_counters()


def _install_amp(torch_npu: ModuleType) -> None:
    """Makes this package's :mod:`torch_npu.ops.amp` the ``amp`` submodule of
    the npu device module, as Ascend's torch_npu has it: ``torch.npu.amp``
    and ``torch_npu.npu.amp`` (attribute and importable name alike), and
    tells core which dtypes the autocast kernels (loaded with ``_C``) handle.

    Core owns ``torch_npu.npu`` but never imports plugins, so the plugin
    attaches the module itself. The submodules are aliased too: otherwise
    ``import torch.npu.amp.grad_scaler`` would load a second copy of the file
    under that name, with a second ``GradScaler`` class.
    """
    from . import amp

    device_module = torch_npu.npu
    register = getattr(device_module, "_register_amp_supported_dtypes", None)
    if register is None:
        warnings.warn(
            "torch-npu-ops: the installed torch-npu-core predates autocast support "
            "(it has no torch.npu.get_amp_supported_dtype), so torch.autocast('npu') "
            "cannot be used. Upgrade torch-npu-core.",
            stacklevel=2,
        )
    else:
        register(amp.SUPPORTED_DTYPES)
    device_module.amp = amp
    backend = torch._C._get_privateuse1_backend_name()
    for package in ("torch_npu.npu.amp", f"torch.{backend}.amp"):
        sys.modules.setdefault(package, amp)
        for name in ("autocast_mode", "grad_scaler"):
            sys.modules.setdefault(f"{package}.{name}", getattr(amp, name))


def _initialize_plugin(torch_npu: ModuleType) -> None:
    """Entry point of the ``torch_npu.plugins`` group: importing this module
    installed the kernels already; this attaches ``torch.npu.amp``."""
    _install_amp(torch_npu)
    # Where PyTorch picks an algorithm per device type, npu takes the CPU's.
    from . import _device_tables

    _device_tables.install()
    # Note [Work queued before a default dtype change] (_default_dtype.py).
    from . import _default_dtype

    _default_dtype.install()
    # Python meta kernels' out= resize warnings: the CPU kernel warns.
    from . import _meta_warnings

    _meta_warnings.install()
    # The custom ops (torch.ops.npu.npu_*), re-exported as torch_npu.npu_*.
    from . import custom

    custom.install(torch_npu)


__all__ = ["cmake_prefix_path", "execution_counters", "reset_execution_counters", "synchronous_ops"]
