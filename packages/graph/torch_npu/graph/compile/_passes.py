"""The post-grad graph passes Inductor runs on npu graphs (NPUPostGradPass):
foreach ops per element (_foreach_ops.py), scaled softmaxes as eager computes them (_scaled_softmax.py), scatter-like
ops as extern kernels (_extern_scatters.py), then mean and var_mean spelled
out.

``mean`` is lowered by Inductor to a sum buffer and a division; ``var_mean``
(and ``var``) are lowered by Inductor to Welford reductions,
whose partial buffers have no aten origin; neither could become MLIR
kernels (Note [Kernels from the nodes' aten origins], _program.py). This
pass spells mean out as sum and divide, and var_mean as sum, divide,
subtract, square, sum and divide (the two-pass formula), which Inductor fuses
and torch-mlir lowers like any reduction. Of float16 or bfloat16 they are
spelled out in float32, between a conversion of the operand and one of the
results (Note [Half-precision reductions accumulate in float32],
_half_sums.py).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx
from torch._inductor.custom_graph_pass import CustomGraphModulePass

from ._extern_scatters import run_scatters_as_externs
from ._foreach_ops import decompose_foreach_ops
from ._half_sums import HALF_DTYPES
from ._max_pool_windows import rewrite_max_pools
from ._scaled_softmax import restore_scaled_softmax

aten = torch.ops.aten


def _decompose_mean(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """mean -> sum / count: Inductor lowers mean to a sum buffer of its own
    plus a division, and that sum buffer has no aten origin."""
    x = node.args[0]
    value = x.meta.get("val")
    if node.kwargs or value is None or not value.is_floating_point() or len(node.args) < 2:
        return
    dims = node.args[1]
    dims = list(range(value.dim())) if dims is None else [d % max(value.dim(), 1) for d in dims]
    keepdim = node.args[2] if len(node.args) > 2 else False
    count = math.prod(value.shape[d] for d in dims) if value.dim() else 1  # a 0-d tensor: dim 0 is itself
    if not isinstance(count, int) or count == 0:
        return
    add = _adder(graph, value)
    with graph.inserting_before(node):
        mean = add(aten.div.Tensor, add(aten.sum.dim_IntList, _widened(add, x), dims, keepdim), float(count))
        mean = _narrowed(add, mean, value.dtype)
    node.replace_all_uses_with(mean)
    graph.erase_node(node)


def _fake(target: Any, *args: Any) -> Any:
    values = torch.fx.node.map_arg(args, lambda n: n.meta["val"])
    return target(*values)


def _adder(graph: torch.fx.Graph, value: torch.Tensor) -> Any:
    """A function that adds a call to the graph (at its insertion point),
    with its fake value."""
    fake_mode = torch._guards.detect_fake_mode([value])

    def add(target: Any, *args: Any) -> torch.fx.Node:
        new = graph.call_function(target, args)
        with fake_mode:
            new.meta["val"] = _fake(target, *args)
        return new

    return add


# Note [Half-precision reductions accumulate in float32]: not only the sums,
# every step of mean and var_mean (the mean, the differences, their squares,
# the sum of squares before its division) is float32 for a half operand, as
# in eager's kernels, which round once.
def _widened(add: Any, x: torch.fx.Node) -> torch.fx.Node:
    """``x`` converted to float32 when it is of a half type, else ``x``."""
    if x.meta["val"].dtype not in HALF_DTYPES:
        return x
    return add(torch.ops.prims.convert_element_type.default, x, torch.float32)


def _narrowed(add: Any, result: torch.fx.Node, dtype: torch.dtype) -> torch.fx.Node:
    """``result`` converted back to ``dtype`` when that is a half type."""
    if dtype not in HALF_DTYPES:
        return result
    return add(torch.ops.prims.convert_element_type.default, result, dtype)


class DecomposeVarMean(CustomGraphModulePass):
    """mean -> sum, div; var_mean / var -> sum, div, sub, mul, sum, div (see
    the module's docstring)."""

    def __call__(self, gm: torch.fx.GraphModule) -> None:
        graph = gm.graph
        for node in list(graph.nodes):
            if node.target is aten.mean.dim:
                _decompose_mean(graph, node)
                continue
            if node.target not in (aten.var_mean.correction, aten.var.correction):
                continue
            x = node.args[0]
            value = x.meta.get("val")
            if value is None or not value.is_floating_point():
                continue
            dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
            if dims is None:
                dims = list(range(value.dim()))
            dims = [d % max(value.dim(), 1) for d in dims]
            correction = node.kwargs.get("correction", 1)
            correction = 1 if correction is None else correction
            keepdim = node.kwargs.get("keepdim", False)
            count = math.prod(value.shape[d] for d in dims) if value.dim() else 1  # a 0-d tensor: dim 0 is itself
            if not isinstance(count, int) or not isinstance(correction, (int, float)):
                continue  # symbolic sizes: left to Inductor
            add = _adder(graph, value)
            with graph.inserting_before(node):
                wide = _widened(add, x)
                mean = add(aten.div.Tensor, add(aten.sum.dim_IntList, wide, dims, True), float(count))
                diff = add(aten.sub.Tensor, wide, mean)
                square = add(aten.mul.Tensor, diff, diff)
                total = add(aten.sum.dim_IntList, square, dims, keepdim)
                var = _narrowed(add, add(aten.div.Tensor, total, float(max(count - correction, 0))), value.dtype)
                if not keepdim:
                    mean = add(aten.squeeze.dims, mean, dims)
                if node.target is aten.var_mean.correction:
                    mean = _narrowed(add, mean, value.dtype)
            if node.target is aten.var.correction:
                node.replace_all_uses_with(var)
            else:
                for user in list(node.users):
                    index = user.args[1] if user.target.__name__ == "getitem" else None
                    if index not in (0, 1):
                        raise RuntimeError(f"unexpected use of var_mean: {user.format_node()}")
                    user.replace_all_uses_with(var if index == 0 else mean)
                    graph.erase_node(user)
            graph.erase_node(node)
        graph.lint()
        gm.recompile()

    def uuid(self) -> Any:
        # Inductor's FX graph cache keys on this: it hashes the npu backend's
        # sources, so cached wrapper code is never that of an older backend.
        return _backend_source_hash()


class NPUPostGradPass(CustomGraphModulePass):
    """Every post-grad rewrite of npu graphs, in order: foreach ops one
    tensor at a time (Note [Foreach ops one tensor at a time]), scaled
    softmaxes without Inductor's finite-rows guard (Note [Scaled softmax
    without the finite-rows guard]), max pools as extern kernels with
    compiled offsets (Note [Max pooling of npu graphs]), scatter-like ops
    as extern kernels (Note [Scatters run as extern kernels]), then
    :class:`DecomposeVarMean` (which lints and recompiles the module)."""

    def __call__(self, gm: torch.fx.GraphModule) -> None:
        decompose_foreach_ops(gm.graph)
        restore_scaled_softmax(gm.graph)
        rewrite_max_pools(gm.graph)  # Note [Max pooling of npu graphs]
        run_scatters_as_externs(gm.graph)  # Note [Scatters run as extern kernels]
        DecomposeVarMean()(gm)

    def uuid(self) -> Any:
        return _backend_source_hash()


def _backend_source_hash() -> str:
    import hashlib
    import pathlib

    h = hashlib.sha256()
    for path in sorted(pathlib.Path(__file__).parent.glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()
