"""Max pooling of npu graphs: the pool as an extern kernel, the window
offsets and indices as MLIR kernels.

Note [Max pooling of npu graphs]
Inductor (torch 2.13) decomposes max_pool2d_with_indices and
max_pool3d_with_indices (windows of up to 25 elements) into two prims of
its own: ``_low_memory_max_pool_with_offsets`` (the values, and the
position of each maximum in its window as int8, which the backward saves)
and ``_low_memory_max_pool_offsets_to_indices`` (those positions as the flat
indices the backward scatters the gradient to). torch-mlir lowers neither:
both ran eagerly with a warning, and where Inductor fused the offsets into a
group with other ops, compiling the model failed (every CNN with a max
pool and a backward). Larger windows (and 3-d pools Inductor does not
decompose) stay ``max_pool*_with_indices``, which torch-mlir lowers, but
its indices differ from eager npu's where a window holds a NaN or only
-inf, so the backward sent the gradient elsewhere, silently; so do its
adaptive_max_pool2d and adaptive_max_pool3d (whose values differ too where
a window holds a NaN), and it lowers no adaptive_max_pool2d of an unbatched
input (a loud fallback).

So the npu post-grad pass (_passes.py) runs the pool itself as an extern
kernel (Note [Scatters run as extern kernels]): the aten op on npu, which
chooses what eager npu chooses (ties: the first position; NaN: the last
NaN; a window of -inf: its first position inside the input). The prims
become elementwise aten ops that torch-mlir lowers: the offsets are computed
from its indices, and the indices from the offsets as Inductor's prim
defines them (``_low_memory_max_pool_offsets_to_indices_aten``).

Why not an MLIR kernel for the pool: a scan over the window's positions
written in aten ops (constant_pad_nd, the windows through unfold, amax and
a per-position score for the position eager takes) matched eager npu, but
torch-mlir's pipeline then hung in LLVM for common shapes: a kernel that
pads a last dim of 16 by one element (constant_pad_nd, then anything)
compiled for minutes (4x8x16x16; 2x2x8x8 compiled), so the pool stays an
extern kernel until that is understood.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable, Sequence

import torch
import torch.fx

from ._extern_scatters import _extern_for

aten = torch.ops.aten
prims = torch.ops.prims

# Pools torch-mlir lowers with other indices than eager npu's (see the Note)
# or not at all (adaptive_max_pool2d of an unbatched input): extern kernels.
_POOLS_AS_EXTERNS = (
    aten.max_pool2d_with_indices.default,
    aten.max_pool3d_with_indices.default,
    aten.adaptive_max_pool2d.default,
    aten.adaptive_max_pool3d.default,
)


def _positions(length: int, start: int, step: int, device: torch.device) -> torch.Tensor:
    """start, start + step, ... (``length`` int64 values), as the prims.iota
    that Inductor's decompositions of arange give."""
    return prims.iota(length, start=start, step=step, dtype=torch.int64, device=device, requires_grad=False)


def max_pool_with_offsets(x: torch.Tensor, kernel: list[int], stride: list[int], padding: list[int],
                          dilation: list[int], ceil_mode: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The maxima over the pooling windows of the last ``len(kernel)`` dims
    of ``x`` and each one's position in its window (int8, row-major), as
    eager npu chooses them (Note [Max pooling of npu graphs])."""
    n = len(kernel)
    op = aten.max_pool2d_with_indices.default if n == 2 else aten.max_pool3d_with_indices.default
    values, indices = _extern_for(op)(x, kernel, stride, padding, dilation, ceil_mode)
    return values, indices_to_offsets(indices, kernel, list(x.shape[-n:]), stride, padding, dilation)


def indices_to_offsets(indices: torch.Tensor, kernel: list[int], in_size: list[int], stride: list[int],
                       padding: list[int], dilation: list[int]) -> torch.Tensor:
    """The window positions (int8, row-major) of flat indices into the
    input's last ``len(kernel)`` dims (the inverse of offsets_to_indices)."""
    n = len(kernel)
    rest = indices
    steps: list[torch.Tensor] = []
    for i in reversed(range(n)):
        at = torch.remainder(rest, in_size[i]) if i else rest
        if i:
            rest = torch.div(rest, in_size[i], rounding_mode="floor")
        out = indices.shape[indices.dim() - n + i]
        base = _positions(out, -padding[i], stride[i], indices.device).view([-1 if d == i else 1 for d in range(n)])
        steps.insert(0, torch.div(at - base, dilation[i], rounding_mode="floor"))
    offsets = steps[0]
    for i in range(1, n):
        offsets = offsets * kernel[i] + steps[i]
    return offsets.to(torch.int8)


def offsets_to_indices(offsets: torch.Tensor, kernel: list[int], in_size: list[int], stride: list[int],
                       padding: list[int], dilation: list[int]) -> torch.Tensor:
    """Flat indices into the input's last ``len(kernel)`` dims of the window
    positions ``offsets`` (as Inductor's prim defines them)."""
    n = len(kernel)
    rest = offsets.to(torch.int64)
    flat = None
    for i in range(n):
        inner = math.prod(kernel[i + 1:])
        step = torch.div(rest, inner, rounding_mode="floor") if inner > 1 else rest
        rest = rest - step * inner
        out = offsets.shape[offsets.dim() - n + i]
        base = _positions(out, -padding[i], stride[i], offsets.device)
        at = base.view([-1 if d == i else 1 for d in range(n)]) + step * dilation[i]
        flat = at if flat is None else flat * in_size[i] + at
    return flat


def _inline(graph: torch.fx.Graph, node: torch.fx.Node, fn: Callable[..., Any], tensors: list[torch.fx.Node]) -> Any:
    """``fn`` of ``tensors`` traced to aten ops and inserted before ``node``;
    the FX nodes of its results. Traced with Inductor's decompositions, as
    its post-grad graphs are (it lowers no op those decompose)."""
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    values = [t.meta["val"] for t in tensors]
    fake_mode = torch._guards.detect_fake_mode(values)
    with fake_mode:
        traced = make_fx(fn, select_decomp_table())(*values)
    mapping: dict[torch.fx.Node, Any] = {}
    placeholders = [p for p in traced.graph.nodes if p.op == "placeholder"]
    for placeholder, tensor in zip(placeholders, tensors):
        mapping[placeholder] = tensor
    with graph.inserting_before(node):
        return graph.graph_copy(traced.graph, mapping)


def _static(*values: Any) -> bool:
    return all(isinstance(v, int) for value in values for v in (value if isinstance(value, (list, tuple)) else [value]))


def _replace_getitems(graph: torch.fx.Graph, node: torch.fx.Node, results: Sequence[torch.fx.Node | None]) -> bool:
    """Points the ``getitem`` users of ``node`` at ``results``; False (and
    nothing changed) when a user is anything else or reads a missing result."""
    users = list(node.users)
    if any(u.target is not operator.getitem or results[u.args[1]] is None for u in users):
        return False
    for user in users:
        user.replace_all_uses_with(results[user.args[1]])
        graph.erase_node(user)
    return True


def _rewrite_with_offsets(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    x, kernel, stride, padding, dilation, ceil_mode = node.args[:6]
    n = len(kernel)
    values = node.meta["val"][0]
    out_size = list(values.shape[-n:])
    if not _static(kernel, stride, padding, dilation, out_size, list(x.meta["val"].shape)):
        return

    def scan(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return max_pool_with_offsets(t, list(kernel), list(stride), list(padding), list(dilation), ceil_mode)

    best, offsets = _inline(graph, node, scan, [x])
    if _replace_getitems(graph, node, [best, offsets]):
        graph.erase_node(node)


def _rewrite_offsets_to_indices(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    offsets, kernel, in_size, stride, padding, dilation = node.args[:6]
    if not _static(kernel, in_size, stride, padding, dilation, list(offsets.meta["val"].shape)):
        return

    def indices(t: torch.Tensor) -> torch.Tensor:
        return offsets_to_indices(t, list(kernel), list(in_size), list(stride), list(padding), list(dilation))

    node.replace_all_uses_with(_inline(graph, node, indices, [offsets]))
    graph.erase_node(node)


def _on_npu(node: torch.fx.Node) -> bool:
    value = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    return isinstance(value, torch.Tensor) and value.device.type == "npu" and value.numel() > 0


def rewrite_max_pools(graph: torch.fx.Graph) -> None:
    """Rewrites the max pools of ``graph`` on npu (Note [Max pooling as a
    scan over the window])."""
    with_offsets = getattr(prims, "_low_memory_max_pool_with_offsets", None)
    to_indices = getattr(prims, "_low_memory_max_pool_offsets_to_indices", None)
    for node in list(graph.nodes):
        if node.op != "call_function" or not _on_npu(node):
            continue
        target = node.target
        if with_offsets is not None and target is with_offsets.default:
            _rewrite_with_offsets(graph, node)
        elif to_indices is not None and target is to_indices.default:
            _rewrite_offsets_to_indices(graph, node)
        elif target in _POOLS_AS_EXTERNS:
            node.target = _extern_for(target)


# Defined at import: wrapper code loaded from Inductor's cache calls them in
# a process whose post-grad pass never ran.
for _op in _POOLS_AS_EXTERNS:
    _extern_for(_op)
