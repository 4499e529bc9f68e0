"""npu entries in PyTorch's per-device-type tables that have no registration API.

npu runs the CPU's kernels on device memory, so where PyTorch picks an
algorithm by device type, the CPU's pick is the right one for npu: it
chooses among the same kernels, and npu then rounds exactly as the CPU does.
Where PyTorch offers a hook, the C++ side uses it instead
(csrc/AttentionChoice.cpp: scaled_dot_product_attention's kernel choice).
"""

from __future__ import annotations

import torch


def install() -> None:
    """Adds the npu entries (idempotent; a torch without a table is left alone)."""
    backend = torch._C._get_privateuse1_backend_name()
    _linear_cross_entropy(backend)
    _meta_device_hint(backend)
    _fake_integer_histc(backend)


def _meta_device_hint(backend: str) -> None:
    # Note [Meta kernels shape the CPU kernel's outputs] (csrc/OutputShapes.h):
    # torch's Python meta kernels lay out their outputs (and choose some
    # checks) as the kernel of device_hint(input) would; for a plain meta
    # tensor that is CUDA's. They are looked up in the module at each call
    # (also by torch._refs), so replacing the module's function reaches them.
    try:
        from torch import _meta_registrations as registrations
    except ImportError:  # a torch without Python meta kernels
        return
    hint = getattr(registrations, "device_hint", None)
    if not callable(hint) or getattr(hint, "_npu_as_cpu", False):
        return
    from . import _C

    shaping_npu_outputs = _C._shaping_npu_outputs

    def device_hint(tensor) -> str:
        device = hint(tensor)
        if device == backend:
            return "cpu"  # a fake tensor on npu
        if (
            device == "cuda"
            and shaping_npu_outputs()
            and getattr(getattr(tensor, "device", None), "type", None) == "meta"
            and not isinstance(tensor, torch._subclasses.FakeTensor)
        ):
            return "cpu"  # the generic executor shaping an npu op's outputs
        return device

    device_hint._npu_as_cpu = True  # type: ignore[attr-defined]
    registrations.device_hint = device_hint


def _fake_integer_histc(backend: str) -> None:
    # torch.histc of an integer npu tensor follows CUDA, which takes integers
    # (csrc/HistogramKernels.cpp), where the CPU kernel takes floating-point
    # tensors only. The Python meta kernel of histc refuses integers wherever
    # device_hint says "cpu", which it says for fake npu tensors (above), so
    # torch.compile of transformers' MoE experts failed while tracing. Fake
    # tensors consult the rules of fake_impls before any meta kernel; this
    # rule takes integer npu tensors only and leaves every other call to the
    # meta kernel.
    try:
        from torch._subclasses import fake_impls
        from torch._subclasses.fake_tensor import FakeTensor
    except ImportError:  # a torch without fake tensors
        return
    if getattr(fake_impls, "_npu_integer_histc", False):
        return
    histc = torch.ops.aten.histc.default

    def integer_histc(fake_mode, func, input, bins=100, min=0, max=0):  # noqa: A002 (aten's names)
        if input.device.type != backend or input.is_floating_point() or input.is_complex() or input.dtype == torch.bool:
            return NotImplemented
        torch._check(bins > 0, lambda: f"torch.histc: bins must be > 0, but got {bins}")
        torch._check(max >= min, lambda: "torch.histc: max must be larger than min")
        with fake_impls.in_kernel_invocation_manager(fake_mode):
            counts = torch.empty(bins, dtype=input.dtype, device="meta")
        return FakeTensor(fake_mode, counts, input.device)

    fake_impls.register_op_impl(lambda func: func is histc)(integer_histc)
    fake_impls._npu_integer_histc = True


def _linear_cross_entropy(backend: str) -> None:
    # F.linear_cross_entropy's chunked path resolves acc_policy="auto" and its
    # accumulation dtype per device type; an unknown type gets a policy whose
    # reduced-precision weight gradient rounds differently from the CPU's.
    # torch 2.13 keeps the policies in a table (_AUTO_DEFAULTS), torch 2.14
    # computes them (_auto_acc_policy); both resolve the dtype in
    # LinearCrossEntropyOptions._resolve_auto_acc_dtype.
    try:
        from torch.nn.modules import linear_cross_entropy_options as options
    except ImportError:  # a torch without linear_cross_entropy
        return
    defaults = getattr(options, "_AUTO_DEFAULTS", None)
    if isinstance(defaults, dict):
        for (device_type, dtype), value in list(defaults.items()):
            if device_type == "cpu":
                defaults.setdefault((backend, dtype), value)
    policy = getattr(options, "_auto_acc_policy", None)
    if callable(policy) and not getattr(policy, "_npu_as_cpu", False):
        def auto_acc_policy(device_type: str | None, dtype: torch.dtype) -> str:
            return policy("cpu" if device_type == backend else device_type, dtype)

        auto_acc_policy._npu_as_cpu = True  # type: ignore[attr-defined]
        options._auto_acc_policy = auto_acc_policy
    cls = getattr(options, "LinearCrossEntropyOptions", None)
    resolve = getattr(cls, "_resolve_auto_acc_dtype", None)
    if callable(resolve) and not getattr(resolve, "_npu_as_cpu", False):
        def resolve_auto_acc_dtype(dtype: torch.dtype, device: torch.device | None) -> torch.dtype | None:
            if device is not None and device.type == backend:
                device = torch.device("cpu")
            return resolve(dtype, device)

        resolve_auto_acc_dtype._npu_as_cpu = True  # type: ignore[attr-defined]
        cls._resolve_auto_acc_dtype = staticmethod(resolve_auto_acc_dtype)
