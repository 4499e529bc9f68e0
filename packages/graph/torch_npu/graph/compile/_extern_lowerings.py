"""Ops of npu graphs whose Inductor lowering is not an aten program run as
extern kernels.

Note [Lowerings that are not aten programs run as extern kernels]
An npu kernel is the aten program of its buffers' origins (Note [Kernels
from the nodes' aten origins], _program.py): every buffer a kernel
computes must hold the value of an FX node, and the program of a value
needs the values of its op's arguments. Inductor's lowering of one aten op
usually makes one loop nest, which becomes the buffer of that op's node,
but some lowerings do otherwise, and torch.compile of the op on npu then
failed:

- they realize a buffer of their own, the value of no FX node: cumsum of
  bools (in cumprod's backward) converts its input to int64 in a buffer
  before calling the aten cumsum; a cat in prod's backward;
- they return a value that reads none of the op's inputs although its
  program needs them: adaptive_max_pool3d's indices over windows of one
  element are the constant 0, so the group computing them reads nothing
  and its program, which calls the pooling op, lacks the input;
- they return a value computed from an extern kernel of their own whose
  output is no FX node's: a convolution with a bias is Inductor's extern
  convolution without it plus a loop adding the bias, named after the
  convolution node, whose program then computed the whole convolution again
  (and failed where its input was computed in the graph: every CNN with
  biased convolutions after an activation).

Which lowerings do this depends on the op, its arguments and the version of
Inductor, so there is no list: each op of an npu graph is lowered by
Inductor as usual, and when the lowering did either, the op is lowered once
more as an extern kernel (Inductor's own fallback for an op it should not
lower, FX meta ``should_fallback``): the wrapper then calls the aten op on
npu, as eager npu would, between the MLIR kernels. The first lowering's
buffers are read by nothing and the scheduler drops them (dead code). Ops
that mutate an argument are not tried twice (the first lowering's mutation
would stay); the scatter pass covers those it must (Note [Scatters run as
extern kernels]). Two lowerings are never tried: the backward of avg_pool2d
and avg_pool3d, which Inductor itself fails on later (_BROKEN_LOWERINGS).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.fx
import torch.utils._pytree as pytree

_FALLBACK_META = "should_fallback"

aten = torch.ops.aten

# Ops whose Inductor lowering (torch 2.13) builds a loop nest that
# Inductor itself then fails to analyse: the backward of avg_pool2d and
# avg_pool3d indexes the gradient by clamped window starts, and the
# scheduler's index simplification of that expression raises "vr must not
# be None for symbol q1" on any device (the same cases fail with Inductor on
# CPU). They are extern kernels on npu from the start.
_BROKEN_LOWERINGS = frozenset(
    getattr(aten, name).default for name in ("avg_pool2d_backward", "avg_pool3d_backward") if hasattr(aten, name))


# Namespaces of ops with effects beyond their results (collectives): they
# are lowered once, by Inductor alone.
_COLLECTIVE_NAMESPACES = frozenset({"_c10d_functional", "c10d", "_dtensor", "symm_mem"})


def _on_npu(node: torch.fx.Node) -> bool:
    """Whether ``node`` computes or reads a tensor on npu."""
    values = [node.meta.get("val"), *(arg.meta.get("val") for arg in node.all_input_nodes)]
    return any(isinstance(v, torch.Tensor) and v.device.type == "npu" for v in pytree.tree_leaves(values))


def _tries_lowering(node: torch.fx.Node | None, target: Any) -> bool:
    """Whether an op of ``node`` is lowered by Inductor and checked, rather
    than left to Inductor alone. Never a collective: a second lowering
    would issue it twice (the first one's extern kernel has effects, so it
    is not dropped as dead code)."""
    from torch._inductor.lowering import lowerings

    return (node is not None and node.op == "call_function" and node.target is target
            and isinstance(target, torch._ops.OpOverload) and target.namespace not in _COLLECTIVE_NAMESPACES
            and target in lowerings
            and not getattr(lowerings[target], "_is_fallback_handler", False)  # an extern kernel already
            and not target._schema.is_mutable and _FALLBACK_META not in node.meta and _on_npu(node))


def _has_aten_origin(buffer: Any) -> bool:
    """Whether a buffer Inductor realized holds the value of an FX node a
    kernel's program can compute (Note [Kernels from the nodes' aten
    origins]); buffers that extern kernels write need none."""
    from torch._inductor import ir

    from ._program import _extern_input_origin, _mutation_origin, _origin_fx_node, _realized_view_origin

    if not isinstance(buffer, ir.ComputedBuffer):
        return True
    return any(find(buffer) is not None
               for find in (_origin_fx_node, _realized_view_origin, _mutation_origin, _extern_input_origin))


def _result_storage(result: Any) -> Any:
    """The buffer of a lowering's result that Inductor gives the node as
    its origin (GraphLowering.run_node), else None."""
    from torch._inductor import ir

    if isinstance(result, ir.TensorBox) and isinstance(result.data, ir.StorageBox):
        return result.data.data
    return None


def _ignores_its_inputs(node: torch.fx.Node, result: Any) -> bool:
    """Whether a value the lowering of ``node`` returns reads no buffer
    although ``node`` reads a tensor that is computed from others."""
    from torch._inductor import ir

    from ._program import _reads_no_tensor

    memo: dict[torch.fx.Node, bool] = {}
    if all(not isinstance(arg.meta.get("val"), torch.Tensor) or _reads_no_tensor(arg, memo)
           for arg in node.all_input_nodes):
        return False
    return any(isinstance(value, ir.TensorBox) and isinstance(value.data, ir.StorageBox)
               and isinstance(value.data.data, ir.Loops) and not value.get_read_names()
               for value in pytree.tree_leaves(result))


def _reads_an_unnamed_extern(graph: Any, first_buffer: int, result: Any) -> bool:
    """Whether a value the lowering returns reads the output of an extern
    kernel the lowering realized whose value is no FX node's: the
    convolution's output before Inductor adds its bias in a loop of its own.
    That loop's buffer is named after the convolution node, so its program
    would compute the whole convolution again, from an input its kernel
    does not read."""
    from torch._inductor import ir

    unnamed = {buffer.get_name() for buffer in graph.buffers[first_buffer:]
               if isinstance(buffer, (ir.ExternKernelAlloc, ir.ExternKernelOut))
               and getattr(buffer, "origin_node", None) is None}
    # Only a loop reading such an output: an extern kernel the lowering
    # returns (a collective's output) is read by the wrapper as it is.
    return bool(unnamed) and any(isinstance(value, ir.TensorBox) and isinstance(value.data, ir.StorageBox)
                                 and isinstance(value.data.data, (ir.ComputedBuffer, ir.Loops))
                                 and unnamed & set(value.get_read_names())
                                 for value in pytree.tree_leaves(result))


def _lowered_as_aten(graph: Any, node: torch.fx.Node, first_buffer: int, result: Any) -> bool:
    """Whether the buffers a lowering realized (``graph.buffers`` from
    ``first_buffer`` on) each hold the value of an FX node, and the values
    it returns can be computed from what their kernels will read."""
    own = _result_storage(result)
    return (all(buffer is own or _has_aten_origin(buffer) for buffer in graph.buffers[first_buffer:])
            and not _ignores_its_inputs(node, result) and not _reads_an_unnamed_extern(graph, first_buffer, result))


def install() -> None:
    """Makes Inductor lower an op of an npu graph as an extern kernel when
    its lowering realizes a buffer with no aten origin (Note [Lowerings that
    are not aten programs run as extern kernels]); idempotent."""
    from torch._inductor.graph import GraphLowering

    original: Callable[..., Any] = GraphLowering.call_function
    if getattr(original, "_npu_extern_lowerings", False):
        return

    def call_function(self: Any, target: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        node = getattr(self, "current_node", None)
        if not _tries_lowering(node, target):
            return original(self, target, args, kwargs)
        if target in _BROKEN_LOWERINGS:
            return _as_extern(self, node, target, args, kwargs)
        first_buffer = len(self.buffers)
        result = original(self, target, args, kwargs)
        if _lowered_as_aten(self, node, first_buffer, result):
            return result
        return _as_extern(self, node, target, args, kwargs)

    def _as_extern(self: Any, node: torch.fx.Node, target: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        # Inductor's own switch for an op it should not lower: layout
        # constraints as for any op, then its fallback handler.
        node.meta[_FALLBACK_META] = True
        try:
            return original(self, target, args, kwargs)
        finally:
            del node.meta[_FALLBACK_META]

    call_function._npu_extern_lowerings = True  # type: ignore[attr-defined]
    GraphLowering.call_function = call_function  # type: ignore[method-assign]
