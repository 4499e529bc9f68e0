"""torch.compile for npu: Inductor with MLIR-compiled fused kernels.

Importing this module registers, for the ``npu`` device:

- Dynamo's device interface (:class:`~._device.NPUInterface`: streams,
  events, synchronize, current device), so compiled code sees npu streams
  and events;
- Inductor's device op overrides (the lines its wrapper writes for npu);
- Inductor's backend: :class:`~._scheduling.MLIRScheduling` fuses nodes and
  emits one ``mlir_fused_<ops>_<n>`` kernel per group, called from
  :class:`~._wrapper.NPUWrapperCodegen`'s wrapper code on the current stream
  (``mlir_fused_mul_0.run(arg0_1, arg1_1, buf0, stream=stream0)``);
- ``mode="reduce-overhead"`` replaying compiled graphs from NPUGraphs
  (:mod:`torch_npu.graph.compile._reduce_overhead`);
- the Inductor option ``npu_backend`` (``"mlir"`` or ``"eager"``;
  ``torch.compile(m, options={"npu_backend": "eager"})``, default from the
  environment variable ``TORCHINDUCTOR_NPU_BACKEND``, else ``"mlir"``).

How kernels are built and run, the fallback and the cache: see
:mod:`torch_npu.graph.compile.kernel` and :mod:`torch_npu.graph.compile._mlir`.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["MLIRKernel", "NPUKernelFallbackWarning", "kernel_cache_dir", "kernel_stats", "register"]

_registered = False


def __getattr__(name: str) -> Any:
    # Lazily: the kernel runtime imports Inductor, which import torch_npu
    # must not pay for. So does every import of this package's modules here
    # (_mlir's brings sympy: about 0.5 s of every process's `import torch`,
    # which loads torch_npu and its plugins).
    if name in ("MLIRKernel", "NPUKernelFallbackWarning"):
        from . import kernel

        return getattr(kernel, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def kernel_cache_dir() -> str:
    """The directory of compiled npu kernels (inside Inductor's cache dir)."""
    from . import _mlir

    return _mlir.cache_dir()


def kernel_stats() -> dict[str, float]:
    """Counts of kernels compiled, loaded from the disk cache and rebuilt
    (corrupt entries) in this process, and the seconds spent; and of
    launches run as blocks of rows on several threads (Note [Outer-dimension
    split of MLIR kernels]), counted by the launcher: "split_launches"."""
    from . import _launch, _mlir

    return {**_mlir.stats, "split_launches": _launch.split_launches()}


def _add_config_option() -> None:
    import sys

    from torch.utils._config_module import _Config, _ConfigEntry

    # From sys.modules: called while the import hook loads the module too.
    config = sys.modules["torch._inductor.config"]

    if "npu_backend" in config._config:
        return
    default = os.environ.get("TORCHINDUCTOR_NPU_BACKEND", "mlir")
    config._config["npu_backend"] = _ConfigEntry(_Config(default=default, value_type=str), "npu_backend")


def register() -> None:
    """Registers npu with Dynamo and Inductor (idempotent)."""
    global _registered
    if _registered:
        return
    from torch._dynamo.device_interface import register_interface_for_device
    from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides

    from ._device import NPUDeviceOpOverrides, NPUInterface
    from ._passes import NPUPostGradPass
    from ._scheduling import MLIRScheduling
    from ._wrapper import NPUWrapperCodegen

    import torch._dynamo.trace_rules
    import torch._inductor.config  # noqa: F401

    _add_config_option()
    # Note [Dynamo does not trace the npu generator state]
    # torch.npu's get/set_rng_state read and write the host-side state of
    # a generator (set_rng_state clones the state tensor and hands it to the
    # generator), as torch.cuda's do. Dynamo skips torch.cuda's functions (they
    # live in torch) and runs them eagerly after a graph break, but would
    # inline torch_npu's: under torch.testing's freeze_rng_state (no_dispatch,
    # which OpInfo's sdpa and multi_head_attention samples use) tracing the
    # clone made fake tensors without a fake mode and compiling raised. The
    # module is skipped, so its functions run eagerly, as torch.cuda's do.
    torch._dynamo.trace_rules.add("torch_npu.npu.random")
    register_interface_for_device("npu", NPUInterface)
    register_device_op_overrides("npu", NPUDeviceOpOverrides())
    register_backend_for_device("npu", MLIRScheduling, NPUWrapperCodegen, device_custom_pass=NPUPostGradPass())
    from . import _batch_norm_stats, _checkpoint_rng, _extern_lowerings, _layer_norm_stats, _reduce_overhead

    _batch_norm_stats.install()  # Note [Batch norm statistics as eager npu gives them]
    _layer_norm_stats.install()  # Note [Layer norm statistics as eager npu gives them]
    _extern_lowerings.install()  # Note [Lowerings that are not aten programs run as extern kernels]
    _reduce_overhead.install()  # mode="reduce-overhead": NPUGraphs
    _checkpoint_rng.install()  # Note [Random ops recomputed by checkpointing]
    _registered = True
