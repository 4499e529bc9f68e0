"""Random ops of activation-checkpointed regions, compiled on npu.

Note [Random ops recomputed by checkpointing]
Under torch.compile, a checkpointed region (torch.utils.checkpoint, which
transformers' gradient_checkpointing_enable uses) is recomputed in the
backward graph, and a random op inside it must draw the numbers its forward
drew. AOTAutograd's partitioner (functionalize_rng_ops) therefore wraps the
forward op in the ``run_and_save_rng_state`` higher-order op, which returns
the device generator's state beside the op's result, and the backward op in
``run_with_rng_state``, which runs it from that state. PyTorch implements
both for cpu, cuda, hpu and xpu only: compiling any checkpointed region with
a random op on npu (scaled_dot_product_attention is one, whatever its
dropout) failed with "Backend not supported for npu". (The other scheme,
"graph-safe" generator states, is CUDA-only in Inductor.)

This module gives both ops an npu implementation, as their cuda one does
with torch.cuda's state: run_and_save_rng_state reads the state of the
generator of the op's device before running it; run_with_rng_state sets
that generator to the saved state, runs the op and restores the state it
found, so the recomputation draws the forward's numbers and leaves the
generator where the backward found it. The kernels are added where PyTorch
chooses by device (the BackendSelect kernel, and for run_and_save_rng_state
the fake and tracing kernels, which call its device table directly); every
other device still goes to PyTorch's own kernels.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch._C import DispatchKey

_installed = False


def _npu_index(args: Any, kwargs: Any) -> int | None:
    """The index of the npu the op runs on, or None when it is not an npu op
    (the device PyTorch's kernels choose by: the ``device`` keyword, else the
    first tensor or device argument; torch 2.14 passes Inductor's
    ``inductor_seeds(count, device)`` its device by position)."""
    device = kwargs.get("device")
    if device is not None:
        device = torch.device(device)
    else:
        device = next((a.device if isinstance(a, torch.Tensor) else a for a in args
                       if isinstance(a, (torch.Tensor, torch.device))), None)
    if device is None or device.type != "npu":
        return None
    return device.index if device.index is not None else torch.npu.current_device()


def _run_and_save_rng_state_npu(op: Any, *args: Any, **kwargs: Any) -> Any:
    return torch.npu.get_rng_state(_npu_index(args, kwargs)), op(*args, **kwargs)


def _run_with_rng_state_npu(rng_state: torch.Tensor, op: Any, *args: Any, **kwargs: Any) -> Any:
    index = _npu_index(args, kwargs)
    found = torch.npu.get_rng_state(index)
    torch.npu.set_rng_state(rng_state.cpu(), index)
    try:
        return op(*args, **kwargs)
    finally:
        torch.npu.set_rng_state(found, index)


def _npu_first(npu: Callable[..., Any], other: Callable[..., Any], state_first: bool) -> Callable[..., Any]:
    """A kernel that runs ``npu`` for ops on an npu and ``other`` (PyTorch's)
    for the rest. ``state_first``: the op and its arguments follow a state."""
    def kernel(*all_args: Any, **kwargs: Any) -> Any:
        args = all_args[2:] if state_first else all_args[1:]
        return (other if _npu_index(args, kwargs) is None else npu)(*all_args, **kwargs)

    return kernel


def install() -> None:
    """Adds the npu kernels of run_and_save_rng_state and run_with_rng_state
    (Note [Random ops recomputed by checkpointing]); idempotent."""
    global _installed
    if _installed:
        return
    from torch._higher_order_ops.utils import registered_hop_fake_fns
    from torch._prims import rng_prims
    from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode

    save, restore = rng_prims.run_and_save_rng_state, rng_prims.run_with_rng_state
    for hop, npu_kernel, state_first in ((save, _run_and_save_rng_state_npu, False),
                                         (restore, _run_with_rng_state_npu, True)):
        hop.py_kernels[DispatchKey.BackendSelect] = _npu_first(
            npu_kernel, hop.py_kernels[DispatchKey.BackendSelect], state_first)
        if DispatchKey.PrivateUse1 not in hop.py_kernels:
            hop.py_impl(DispatchKey.PrivateUse1)(npu_kernel)
    # run_and_save_rng_state's fake kernel reads the state as the real one
    # does (a host tensor); its tracing kernel computes the example values
    # with the npu kernel. (run_with_rng_state's fake kernel only runs the
    # op, and its tracing kernel dispatches again.)
    registered_hop_fake_fns[save] = _npu_first(_run_and_save_rng_state_npu, registered_hop_fake_fns[save],
                                               state_first=False)
    tracing = save.python_key_table[ProxyTorchDispatchMode]

    def trace(mode: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
        if _npu_index(args, kwargs) is None:
            return tracing(mode, op, *args, **kwargs)
        return _trace_npu(mode, save, op, *args, **kwargs)

    save.python_key_table[ProxyTorchDispatchMode] = trace
    save._dispatch_cache.clear()
    restore._dispatch_cache.clear()
    _installed = True


def _trace_npu(mode: Any, hop: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    """run_and_save_rng_state's tracing kernel, as PyTorch's, with the npu
    kernel computing the example values."""
    from torch.fx.experimental.proxy_tensor import track_tensor_tree
    from torch.utils import _pytree as pytree

    out = _run_and_save_rng_state_npu(op, *args, **kwargs)
    proxy_args = pytree.tree_map(mode.tracer.unwrap_proxy, (op, *args))
    proxy_kwargs = pytree.tree_map(mode.tracer.unwrap_proxy, kwargs)
    out_proxy = mode.tracer.create_proxy("call_function", hop, proxy_args, proxy_kwargs)
    return track_tensor_tree(out, out_proxy, constant=None, tracer=mode.tracer)
