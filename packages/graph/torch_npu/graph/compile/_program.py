"""A fused group of Inductor's scheduler nodes as an aten program.

Note [Kernels from the nodes' aten origins]
Inductor's npu kernels are not generated from its loop-level IR: each fused
group is turned back into the aten ops it was lowered from (the FX nodes in
the buffers' ``origins``), and that aten program is what torch-mlir
compiles (or, as the documented fallback, what runs eagerly on npu). The
program's inputs are exactly the buffers the group reads (the scheduler
knows their lifetimes, so no other buffer may be named: it could already be
freed or reused), its outputs the group's buffers that are used outside it;
the values in between are recomputed from the inputs, so a producer that
Inductor inlined into two groups is computed in both, as Inductor would.
A group whose outputs or inputs cannot be matched with FX nodes raises
:class:`UnmappableGroup`; the scheduler then does not fuse it.

The program is kept as Python source (a function of the input tensors, the
size symbols it needs and the device), so the wrapper code can embed it and
a process that loads the wrapper from Inductor's cache rebuilds it.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, Iterable

import sympy
import torch
import torch.fx
from torch._inductor.virtualized import V

from . import _collective_buffers, _half_in_float32, _half_sums, _lanes, _math, _random_numbers


class UnmappableGroup(Exception):
    """The group's buffers cannot be expressed as an aten program."""


@dataclass
class Program:
    """An aten program computing a fused group's outputs."""

    source: str
    input_names: list[str]
    output_names: list[str]
    symbols: list[str]
    op_names: list[str] = field(default_factory=list)


# Ops a program may recompute when it reaches them through an input that is
# not a buffer of its own (views and shape-only ops are free; anything else
# would duplicate real work).
_VIEW_OPS = {
    "view", "_unsafe_view", "reshape", "expand", "permute", "transpose", "t", "squeeze",
    "unsqueeze", "slice", "select", "as_strided", "alias", "clone", "_to_copy",
    # views with several results, read through getitem
    "split", "split_with_sizes", "unbind", "chunk",
}


def _origin_fx_node(buffer: Any) -> torch.fx.Node | None:
    node = getattr(buffer, "origin_node", None)
    if node is None:
        node = getattr(getattr(buffer, "data", None), "origin_node", None)
    return node


def _computed_origin(buffer: Any) -> torch.fx.Node | None:
    """The FX node whose value ``buffer``'s own kernel writes: its origin
    node, before any functional collective that writes the buffer in place
    later (Note [Buffers of functional collectives])."""
    from torch._inductor import ir

    node = _origin_fx_node(buffer)
    if node is None or not isinstance(buffer, ir.ComputedBuffer):
        return node
    return _collective_buffers.value_before_collectives(node)


def _is_symbolic(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool, int, float))


def _op_name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return target._opname
    return getattr(target, "__name__", str(target))


# Note [Values passed through control dependencies]
# Inductor orders stream operations (an event's record or wait, a stream's
# wait on another) after the work they follow by wrapping them in its
# ``control_deps`` operator, whose subgraph runs the stream operation and
# returns tensors it was given unchanged (``getitem(control_deps, i)``); the
# ops after it read those. Such a value is the tensor it passes on: a
# program that reaches it reads (or computes) that tensor instead, and a
# group never runs the stream operation itself, which stays in the wrapper.
# Two consequences, both seen with torch 2.14: the buffer of the tensor may
# be named after any node of the chain (``_value_source`` matches reads and
# outputs by the node that computes the value), and the buffer that orders
# later readers is an ``OrderingBarrier`` (``ordering_only``) rather than a
# "mutation" by the stream operation (``_ordering_only_origin``).
def _passed_through(n: torch.fx.Node) -> torch.fx.Node | None:
    """The node whose value ``n`` holds unchanged when ``n`` is an output of
    ``control_deps`` that passes an argument on, else None."""
    if n.op != "call_function" or n.target is not operator.getitem:
        return None
    deps = n.args[0]
    if not isinstance(deps, torch.fx.Node) or getattr(deps.target, "__name__", None) != "control_deps":
        return None
    subgraph_attr = deps.args[1]
    owner = deps.graph.owning_module
    if not isinstance(subgraph_attr, torch.fx.Node) or subgraph_attr.op != "get_attr" or owner is None:
        return None
    subgraph = getattr(owner, str(subgraph_attr.target), None)
    if not isinstance(subgraph, torch.fx.GraphModule):
        return None
    results = subgraph.graph.output_node().args[0]
    if not isinstance(results, (tuple, list)) or not isinstance(n.args[1], int) or n.args[1] >= len(results):
        return None
    result = results[n.args[1]]
    placeholders = [p for p in subgraph.graph.nodes if p.op == "placeholder"]
    passed = deps.args[2:]
    if not isinstance(result, torch.fx.Node) or result.op != "placeholder" or len(placeholders) != len(passed):
        return None
    source = passed[placeholders.index(result)]
    return source if isinstance(source, torch.fx.Node) else None


def _value_source(n: torch.fx.Node) -> torch.fx.Node:
    """The node that computes ``n``'s value: ``n`` itself, or what the
    control dependencies it is an output of pass on. Inductor may name a
    buffer after any node of such a chain (torch 2.14 names the buffer of
    ``relu`` after the last ``getitem`` that passes it on), so a group's
    reads and outputs are matched by their sources."""
    while (source := _passed_through(n)) is not None:
        n = source
    return n


def _named(n: torch.fx.Node, names: dict[torch.fx.Node, str]) -> str:
    """``n``'s name in a program, seeing through control dependencies (Note
    [Values passed through control dependencies])."""
    while n not in names:
        source = _passed_through(n)
        if source is None:
            return names[n]  # KeyError: a bug in build_program
        n = source
    return names[n]


class _Printer:
    def __init__(self) -> None:
        self.symbols: dict[str, None] = {}

    def expr(self, expr: sympy.Expr) -> str:
        expr = V.graph.sizevars.simplify(expr)
        for s in sorted(expr.free_symbols, key=str):
            self.symbols[str(s)] = None
        return f"({expr})" if not expr.is_number else str(int(expr) if expr.is_integer else float(expr))

    def value(self, a: Any, names: dict[torch.fx.Node, str]) -> str:
        if isinstance(a, torch.fx.Node):
            if _is_symbolic(a):
                return self.value(a.meta["val"], names)
            return _named(a, names)
        if isinstance(a, (list, tuple)):
            inner = ", ".join(self.value(x, names) for x in a)
            return f"[{inner}]" if isinstance(a, list) else f"({inner},)"
        if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return self.expr(a.node.expr)
        if isinstance(a, sympy.Expr):
            return self.expr(a)
        if isinstance(a, bool) or a is None or isinstance(a, (int, str)):
            return repr(a)
        if isinstance(a, float):
            return repr(a) if math.isfinite(a) else f"float({str(a)!r})"
        if isinstance(a, torch.device):
            return "_device"
        if isinstance(a, (torch.dtype, torch.layout, torch.memory_format)):
            return str(a)
        raise UnmappableGroup(f"argument {a!r} of type {type(a).__name__} cannot be printed")


def _buffer_fx_map() -> dict[str, torch.fx.Node]:
    """Buffer or graph-input name -> the FX node whose value it holds
    (kept on the graph while its buffers do not change: the scheduler asks
    for every pair of nodes it considers fusing)."""
    cached = getattr(V.graph, "_npu_buffer_fx_map", None)
    if cached is not None and cached[0] == len(V.graph.buffers):
        return cached[1]
    mapping = _compute_buffer_fx_map()
    V.graph._npu_buffer_fx_map = (len(V.graph.buffers), mapping)
    return mapping


def _compute_buffer_fx_map() -> dict[str, torch.fx.Node]:
    mapping: dict[str, torch.fx.Node] = {}
    for node in V.graph.module.graph.nodes:
        if node.op == "placeholder" and node.target in V.graph.graph_inputs:
            mapping[node.target] = node
    for buffer in V.graph.buffers:
        fx = (_computed_origin(buffer) or _extern_output_origin(buffer) or _realized_view_origin(buffer)
              or _collective_buffers.mutation_result(buffer) or _mutation_origin(buffer)
              or _extern_argument_origin(buffer) or _extern_input_origin(buffer))
        if fx is None:
            fx = (_ordering_only_origin(buffer, mapping) or _layout_copy_origin(buffer, mapping)
                  or _concatenated_piece_origin(buffer))
        if fx is not None:
            mapping[buffer.get_name()] = fx
    return mapping


# Note [Pieces of a concatenation]
# Inductor lowers ``cat`` of realized inputs to a ConcatKernel: each input
# is written straight into its slice of the result's buffer. An input that
# cannot be moved there (a reduction whose buffer other ops also read) is
# copied in by a buffer of its own whose layout is that slice
# (NonOwningLayout), and whose value is that input of the cat; it has no
# origin node of its own, so a group that computed it (Mamba's backward
# concatenates a matmul and two reductions) could not be built. Its value
# is the cat's input at its position among the kernel's inputs, checked by
# shape.
def _concatenated_piece_origin(buffer: Any) -> torch.fx.Node | None:
    """The cat input whose value ``buffer`` copies into its slice of a
    concatenation (Note [Pieces of a concatenation]), else None."""
    from torch._inductor import ir

    if not isinstance(getattr(buffer, "layout", None), ir.NonOwningLayout):
        return None
    name = buffer.get_name()
    for kernel in V.graph.buffers:
        if not isinstance(kernel, ir.ConcatKernel):
            continue
        pieces = [piece.get_name() if hasattr(piece, "get_name") else None for piece in kernel.inputs]
        if name not in pieces:
            continue
        cats = [n for n in getattr(kernel, "origins", ()) if n.target is torch.ops.aten.cat.default]
        if len(cats) != 1:
            return None
        cat = cats[0]
        sources = [a for a in cat.args[0] if isinstance(a, torch.fx.Node)]
        if len(sources) != len(pieces):
            return None
        source = sources[pieces.index(name)]
        value = source.meta.get("val")
        if not isinstance(value, torch.Tensor) or list(value.shape) != list(buffer.get_size()):
            return None
        return source
    return None


# Stream operations that write no tensor: Inductor lowers a stream's wait
# with a "mutation" of the tensors passed through it, only so that their
# later readers are ordered after the wait.
_ORDERING_ONLY_OPS = {"streams::wait_stream", "streams::wait_event", "streams::record_event"}


class _SingleLoad:
    """An ops handler that records the one load of a pointwise body and
    fails on any other op (see _layout_copy_origin)."""

    LOADED = object()

    def __init__(self) -> None:
        self.loads: list[tuple[str, sympy.Expr]] = []

    def load(self, name: str, index: sympy.Expr) -> object:
        self.loads.append((name, index))
        return self.LOADED

    def __getattr__(self, name: str) -> Any:
        raise UnmappableGroup(f"ops.{name}")


# Note [Layout copies]
# An extern kernel (an op with no decomposition, e.g. the flash-attention
# backward) may need an input in another layout than the one it has, and
# Inductor then inserts a buffer that copies it: a pointwise body with one
# load and nothing else, whose origins are the extern kernel's node. Its
# value is the value of the buffer it loads, read element by element in
# logical order (the load's index is the source's layout of the output's
# index); its kernel's program is a copy of that value (build_program).
def _layout_copy_origin(buffer: Any, mapping: dict[str, torch.fx.Node]) -> torch.fx.Node | None:
    """The value of a buffer that copies another into a new layout (Note
    [Layout copies]), else None."""
    from torch._inductor import ir

    if not isinstance(buffer, ir.ComputedBuffer) or not isinstance(buffer.data, ir.Pointwise):
        return None
    recorder = _SingleLoad()
    (index,) = buffer.data.inner_fn_args()
    try:
        with V.set_ops_handler(recorder):
            result = buffer.data.inner_fn(index)
    except Exception:  # any other op: not a plain copy
        return None
    # V.ops wraps values (OpsValue): the body must return the load itself.
    if getattr(result, "value", result) is not _SingleLoad.LOADED or len(recorder.loads) != 1:
        return None
    name, load_index = recorder.loads[0]
    source_fx = mapping.get(name)
    try:
        source_layout = V.graph.get_buffer(name).get_layout()
    except Exception:
        return None
    if source_fx is None or source_layout.dtype != buffer.get_dtype():
        return None
    sizevars = V.graph.sizevars
    if len(source_layout.size) != len(index) or any(
            not sizevars.statically_known_equals(a, b) for a, b in zip(source_layout.size, buffer.get_size())):
        return None
    expected = source_layout.offset + sum(
        stride * var for stride, var, size in zip(source_layout.stride, index, source_layout.size)
        if not sizevars.statically_known_equals(size, 1))
    if sizevars.simplify(load_index - expected) != 0:
        return None
    return source_fx


def _holds_value_of(buffer: Any, node: torch.fx.Node) -> bool:
    """Whether ``buffer`` can hold ``node``'s value: a tensor of its dtype and shape."""
    value = node.meta.get("val")
    return (
        isinstance(value, torch.Tensor)
        and value.dtype == buffer.get_dtype()
        and list(value.shape) == list(buffer.get_size())
    )


# Note [Extern kernel outputs copied into another layout]
# Inductor names a buffer after the FX node it computes (``origin_node``)
# only when that node's lowering returns the buffer itself. With its layout
# optimization (channels-last convolutions), a convolution whose fake output
# is contiguous but whose users want channels-last is lowered to the extern
# kernel's buffer followed by a copy into the other layout: the copy gets
# ``origin_node`` (the convolution), the kernel's own buffer none. The copy's
# group reads the kernel's buffer, which then mapped to no value, and its
# program reached the convolution's input instead (EfficientNet's padded
# pixels: "constant_pad_nd is neither computed by the group nor read by
# it"). The kernel's buffer holds the value of the one origin that is a call
# of the kernel's op with the buffer's shape and dtype; so does the one
# output (MultiOutput without indices) of a kernel Inductor runs as its
# fallback (EfficientNet's squeeze-and-excitation convolution).
def _extern_output_origin(buffer: Any) -> torch.fx.Node | None:
    """The FX node an extern kernel's buffer without ``origin_node`` holds
    (Note [Extern kernel outputs copied into another layout]), else None."""
    from torch._inductor import ir

    if not isinstance(buffer, ir.ExternKernel) or getattr(buffer, "origin_node", None) is not None:
        return None
    kernel = buffer
    if isinstance(buffer, ir.MultiOutput):
        # the one output of a fallback kernel: the kernel's value itself
        if buffer.indices or len(buffer.inputs) != 1 or not isinstance(buffer.inputs[0], ir.ExternKernel):
            return None
        kernel = buffer.inputs[0]
    elif isinstance(buffer.layout, ir.MultiOutputLayout):
        return None  # a kernel of several outputs (their MultiOutput buffers hold the values)
    elif isinstance(buffer.layout, ir.NoneLayout):
        return None  # a kernel that returns nothing (an in-place collective): it holds no value
    overload = getattr(kernel, "op_overload", None)
    if overload is None:
        return None
    origins = {*getattr(kernel, "origins", ()), *getattr(buffer, "origins", ())}
    calls = [n for n in origins if n.op == "call_function" and n.target is overload]
    if len(calls) != 1:
        return None
    return calls[0] if _holds_value_of(buffer, calls[0]) else None


def _ordering_only_origin(buffer: Any, mapping: dict[str, torch.fx.Node]) -> torch.fx.Node | None:
    """The value a buffer holds that only orders its readers after a stream
    operation (Note [Values passed through control dependencies]): the
    value of the buffer it names, which the operation does not change."""
    mutated = buffer.get_mutation_names()
    if len(mutated) != 1:
        return None
    # torch 2.14 makes such a buffer an ``OrderingBarrier``, which says so
    # itself; torch 2.13 a "mutation" by the stream operation.
    if not getattr(buffer, "ordering_only", False):
        overload = getattr(getattr(buffer, "mutating_node", None), "op_overload", None)
        if getattr(overload, "name", lambda: None)() not in _ORDERING_ONLY_OPS:
            return None
    return mapping.get(mutated[0])


def _mutation_origin(buffer: Any) -> torch.fx.Node | None:
    """The value a buffer that mutates an input holds: the source of the
    input's ``copy_`` (functionalization's write-back), when it has the
    buffer's shape and dtype."""
    if not buffer.get_mutation_names():
        return None
    copies = [n for n in getattr(buffer, "origins", ()) if n.target is torch.ops.aten.copy_.default]
    if len(copies) != 1 or not isinstance(copies[0].args[1], torch.fx.Node):
        return None
    source = copies[0].args[1]
    value = source.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.dtype != buffer.get_dtype():
        return None
    if list(value.shape) != list(buffer.get_size()):
        return None
    return source


def _realized_view_origin(buffer: Any) -> torch.fx.Node | None:
    """The FX node of a buffer Inductor realized as a copy of a view (for an
    extern kernel that needs a dense input): such a buffer has no
    ``origin_node``, but its value is that of the last view of its origins.
    Only that narrow case is matched; anything else stays unmapped."""
    from torch._inductor import ir

    if not isinstance(buffer, ir.ComputedBuffer) or not isinstance(buffer.data, ir.Pointwise):
        return None
    origins = set(getattr(buffer, "origins", ()))
    # Sinks: origins no other origin uses; a multi-output op (an extern
    # kernel's tuple) is read through getitem nodes, outside the origins.
    sinks = [
        n for n in origins
        if not any(u in origins for u in n.users) and not isinstance(n.meta.get("val"), (tuple, list))
    ]
    if len(sinks) != 1 or sinks[0].op != "call_function" or _op_name(sinks[0]) not in _VIEW_OPS:
        return None
    return sinks[0] if _holds_value_of(buffer, sinks[0]) else None


def _extern_input_origin(buffer: Any) -> torch.fx.Node | None:
    """The FX node of a buffer Inductor realized as the input of an extern
    kernel (e.g. the flash-attention backward, given the gradient of its
    output, or an op lowered as Inductor's fallback, given a contiguous copy
    of its input): the buffer has no ``origin_node``; its origins are the
    extern kernel's node and the nodes inlined into the input. The kernel's
    node is the one origin with several outputs, else the one origin no
    other origin uses, if an extern kernel of the graph computes it. The
    buffer's value is the one argument of that kernel among its origins that
    no other origin uses and that has the buffer's shape and dtype; when
    that is not exactly one node, the buffer stays unmapped."""
    from torch._inductor import ir

    if not isinstance(buffer, ir.ComputedBuffer) or getattr(buffer, "origin_node", None) is not None:
        return None
    origins = set(getattr(buffer, "origins", ()))
    externs = {n for n in origins if isinstance(n.meta.get("val"), (tuple, list))}
    if not externs:
        externs = {n for n in origins if not any(u in origins for u in n.users)} & _extern_kernel_nodes()
    if len(externs) != 1:
        return None
    (extern,) = externs
    candidates = []
    for n in extern.all_input_nodes:
        value = n.meta.get("val")
        if (n in origins and n.op == "call_function" and not any(u in origins - externs for u in n.users)
                and isinstance(value, torch.Tensor) and value.dtype == buffer.get_dtype()
                and list(value.shape) == list(buffer.get_size())):
            candidates.append(n)
    return candidates[0] if len(set(candidates)) == 1 else None


# Note [Extern kernel inputs told apart by position]
# When an extern kernel takes several realized inputs of one shape and
# dtype (scaled_dot_product_attention's query, key and value, which a
# model's rotary embedding and grouped-query expand compute), their
# buffers' origins are the same merged set and _extern_input_origin cannot
# tell which value each holds. The kernel can: its ``inputs`` are its
# tensor arguments in the order pytree flattens the FX node's ``(args,
# kwargs)`` (ExternKernel.process_kernel), so a buffer that is exactly the
# i-th input holds the value of the node's i-th tensor argument. This exact
# match is tried before _extern_input_origin's guess from the origins, which
# took a convolution backward's dense copy of its (transposed) input for
# the output's gradient, the one candidate of that shape among the origins.
def _extern_argument_origin(buffer: Any) -> torch.fx.Node | None:
    """The FX argument an extern kernel takes at the position where it
    takes ``buffer`` itself (Note [Extern kernel inputs told apart by
    position]), when its shape and dtype are the buffer's; else None."""
    from torch._inductor import ir

    if not isinstance(buffer, ir.ComputedBuffer) or getattr(buffer, "origin_node", None) is not None:
        return None
    place = _extern_input_positions().get(buffer.get_name())
    if place is None:
        return None
    kernel, position = place
    overload = getattr(kernel, "op_overload", None)
    nodes = [n for n in getattr(kernel, "origins", ()) if n.op == "call_function" and n.target is overload]
    if overload is None or len(nodes) != 1:
        return None
    leaves = torch.utils._pytree.tree_leaves((nodes[0].args, nodes[0].kwargs))
    tensors = [a for a in leaves if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor)]
    if len(tensors) != len(kernel.inputs):
        return None
    value = tensors[position].meta["val"]
    if value.dtype != buffer.get_dtype() or list(value.shape) != list(buffer.get_size()):
        return None
    return tensors[position]


def _extern_input_positions() -> dict[str, tuple[Any, int]]:
    """Buffer name -> (extern kernel, position) for each buffer an extern
    kernel of the graph takes as itself (not a view of it) at exactly one
    position (kept on the graph while its buffers do not change)."""
    from torch._inductor import ir

    cached = getattr(V.graph, "_npu_extern_input_positions", None)
    if cached is not None and cached[0] == len(V.graph.buffers):
        return cached[1]
    positions: dict[str, tuple[Any, int]] = {}
    taken: set[str] = set()
    for kernel in V.graph.buffers:
        if not isinstance(kernel, ir.ExternKernel):
            continue
        for position, taken_input in enumerate(kernel.inputs):
            if not isinstance(taken_input, ir.ComputedBuffer):
                continue
            name = taken_input.get_name()
            if name in positions or name in taken:
                positions.pop(name, None)  # taken twice: ambiguous
                taken.add(name)
                continue
            positions[name] = (kernel, position)
    V.graph._npu_extern_input_positions = (len(V.graph.buffers), positions)
    return positions


def _extern_kernel_nodes() -> set[torch.fx.Node]:
    """The FX nodes the graph's extern kernels so far were lowered from
    (kept on the graph while its buffers do not change)."""
    from torch._inductor import ir

    cached = getattr(V.graph, "_npu_extern_kernel_nodes", None)
    if cached is not None and cached[0] == len(V.graph.buffers):
        return cached[1]
    nodes = {n for buffer in V.graph.buffers if isinstance(buffer, ir.ExternKernel)
             for n in getattr(buffer, "origins", ())}
    V.graph._npu_extern_kernel_nodes = (len(V.graph.buffers), nodes)
    return nodes


def _call(node: torch.fx.Node, args: list[str], names: dict[torch.fx.Node, str]) -> str:
    """The source of one op's call, with the rewrites torch-mlir needs
    (``names``: the program's names of the values computed so far)."""
    target = node.target
    name = f"torch.ops.{target.namespace}.{target._opname}.{target._overloadname}"
    exponent = node.args[1] if target is torch.ops.aten.pow.Tensor_Scalar and not node.kwargs else None
    if isinstance(exponent, (int, float)) and not isinstance(exponent, bool) and exponent in (1, 2, 3, 4, -1, -2):
        # torch-mlir turns an integral exponent into math.fpowi, which MLIR's
        # LLVM lowering rejects once vectorised: small powers are products.
        power = abs(int(exponent))
        product = "torch.ops.aten.mul.Tensor(" * (power - 1) + args[0] + f", {args[0]})" * (power - 1)
        if power == 1:
            product = f"torch.ops.aten.mul.Tensor({args[0]}, 1)"
        return product if exponent > 0 else f"torch.ops.aten.reciprocal.default({product})"
    math_source = _math.math_call(node, name, args, names)
    if math_source is not None:
        # Note [Math MLIR expands unsoundly] and the Notes with it
        return math_source
    value = node.meta.get("val")
    if _is_reduction_of_a_scalar(node):
        # Note [Reductions of a 0-d tensor]
        return f"torch.ops.aten._to_copy.default({args[0]}, dtype={value.dtype})"
    if _half_sums.accumulates_in_half(node):
        # Note [Half-precision reductions accumulate in float32]
        wide = _half_sums.float32_arguments(node, args)
        call = (_lanes.lane_reduction_call(wide, node) if _lanes.is_lane_reduction(node)
                else f"{name}({', '.join(wide)})")
        return f"torch.ops.aten._to_copy.default({call}, dtype={value.dtype})"
    if _lanes.is_lane_reduction(node):
        # Note [Innermost reductions in lanes]
        return _lanes.lane_reduction_call(args, node)
    any_source = _lanes.any_call(args, node)
    if any_source is not None:
        return any_source
    if target._opname == "fma" and len(args) == 3:
        # torch-mlir has no lowering for prims.fma.
        return f"torch.ops.aten.add.Tensor(torch.ops.aten.mul.Tensor({args[0]}, {args[1]}), {args[2]})"
    torch_mlir_source = _torch_mlir_rewrite(node, args)
    if torch_mlir_source is not None:
        return torch_mlir_source
    random_source = _random_numbers.random_call(node, args)
    if random_source is not None:
        # Note [Random numbers of a kernel]
        return random_source
    if target is torch.ops.prims.rev.default:
        # torch-mlir cannot legalize prims.rev (Inductor's flip, and with it
        # fliplr, flipud, rot90 and the backward of cumsum); aten.flip is the
        # same op and lowers to linalg.
        return f"torch.ops.aten.flip.default({', '.join(args)})"
    return f"{name}({', '.join(args)})"


# Note [Ops torch-mlir folds or lowers wrongly]
# Spellings torch-mlir mishandles, each rewritten by the program into
# the same values in ops it lowers:
#
# - ``eq(x, x)``: torch-mlir folds it to a constant true, also for floats,
#   where a NaN compares unequal (amax's backward of a 0-d tensor compares
#   the input with its "amax", a copy torch-mlir folds away; eager gives
#   False at NaN). The program computes every ``eq(a, b)`` as
#   ``not(a != b)``, the same for every value, which it does not fold.
# - a uint8 constant: torch-mlir folds it into an int8 literal that it then
#   rejects as the uint8 result ("inferred type(s) si8 are incompatible
#   with ui8"), and a bool constant (``full(shape, True, dtype=bool)``:
#   isfinite, isreal, isposinf of integers) is one once kept in bytes (Note
#   [Bool values of a program in bytes]). The program computes a bool
#   constant of static shape as ``iota >= 0`` (or ``< 0`` for False), which
#   is not folded and costs a compare per element.
# - integer division of uint8 or int8 with rounding (floor_divide): its
#   lowering stops at "for conversion to byte or char type dstOriginalDtype
#   has to be passed". The program divides in int32 (where every quotient
#   of two 8-bit integers is exact) and converts back, which wraps as eager
#   does (int8 -128 // -1 is -128).
# - as_strided_copy has no lowering; as_strided does (torch.export spells
#   it as an index of constant positions). The program reads the same
#   elements through as_strided and clones them, where that is the same
#   value: the input's value is contiguous from storage offset 0 and every
#   position read is inside it (the kernel's inputs are contiguous tensors
#   of their values, not their storage).
# - ``fmod`` of a signed integer tensor by a number (Inductor's roll
#   computes its source positions so): torch-mlir cannot legalize the
#   number ("failed to legalize operation 'torch.constant.int'"), but
#   lowers ``fmod`` of two tensors of signed integers to the truncating
#   remainder eager computes. The program divides by a tensor of the
#   number (``full_like``). Not for unsigned integers (their remainder was
#   computed signed: 254 % 7 gave 254) nor floats (1e30 % 7 gave 0 for 1,
#   x % inf NaN for x), nor for 0 and -1, whose division traps.
# - ``constant_pad_nd`` with a negative pad (which crops: the backward of
#   every padding, local_response_norm's and unfold's backward): its
#   lowering fails on the negative offset ("expected offsets to be
#   non-negative"). The program crops with ``slice`` first and pads the
#   rest, the same elements. A padding of bools is computed in bytes: its
#   bool buffer was written through a ``memref.subview``, which Note
#   [Bool buffers of a kernel in bytes] cannot rewrite.
def _torch_mlir_rewrite(node: Any, args: list[str]) -> str | None:
    """The source of ``node``'s call spelled so that torch-mlir lowers it
    correctly (Note [Ops torch-mlir folds or lowers wrongly]), else None."""
    target = node.target
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or node.kwargs.get("out") is not None:
        return None
    if target is torch.ops.aten.eq.Tensor and len(node.args) == 2:
        return f"torch.ops.aten.logical_not.default(torch.ops.aten.ne.Tensor({args[0]}, {args[1]}))"
    if target in (torch.ops.aten.div.Tensor_mode, torch.ops.aten.floor_divide.default) and value.dtype in (
            torch.uint8, torch.int8):
        converted = [f"torch.ops.aten._to_copy.default({a}, dtype=torch.int32)"
                     if isinstance(n, torch.fx.Node) else a for n, a in zip(node.args, args)]
        keywords = [f"{k}={v!r}" for k, v in node.kwargs.items()]
        name = f"torch.ops.aten.{target._opname}.{target._overloadname}"
        return f"torch.ops.aten._to_copy.default({name}({', '.join(converted + keywords)}), dtype={value.dtype})"
    if target is torch.ops.aten.as_strided_copy.default and _as_strided_reads_inside(node):
        return f"torch.ops.aten.clone.default(torch.ops.aten.as_strided.default({', '.join(args)}))"
    if target is torch.ops.aten.fmod.Scalar and _divides_signed_integers(node):
        return f"torch.ops.aten.fmod.Tensor({args[0]}, torch.ops.aten.full_like.default({args[0]}, {args[1]}))"
    if target is torch.ops.aten.constant_pad_nd.default:
        return _cropped_then_padded(node, args)
    return None


def _divides_signed_integers(node: Any) -> bool:
    """Whether ``fmod.Scalar`` ``node`` divides a tensor of signed integers
    by a number of its dtype other than 0 and -1 (Note [Ops torch-mlir
    folds or lowers wrongly])."""
    source = _meta_value(node.args[0])
    divisor = node.args[1] if len(node.args) == 2 else None
    if (not isinstance(source, torch.Tensor) or source.dtype not in (torch.int8, torch.int16, torch.int32, torch.int64)
            or not isinstance(divisor, int) or isinstance(divisor, bool) or divisor in (0, -1)):
        return False
    info = torch.iinfo(source.dtype)
    return info.min <= divisor <= info.max


# Note [Paddings as concatenations]
# torch-mlir lowers constant_pad_nd to tensor.pad, and LLVM's O3 compile of
# the kernel that pads the last dimension of a (4, 8, 16, 16) tensor by one
# element did not end (minutes; a pad by 2 took 2 s): a compiled
# F.pad(x, (1, 0)) hung. So a program pads by concatenating blocks of the
# fill value before and after the (cropped) tensor, one dimension at a
# time: the same elements, lowered as slices inserted into one buffer.
def _cropped_then_padded(node: Any, args: list[str]) -> str | None:
    """The source of ``constant_pad_nd`` ``node`` with its negative pads as
    slices, its positive ones as concatenations (Note [Paddings as
    concatenations]) and bools in bytes (Note [Ops torch-mlir folds or
    lowers wrongly]), or None where its shapes or fill are not static or it
    crops a dimension to nothing."""
    source = _meta_value(node.args[0])
    pads = node.args[1] if len(node.args) > 1 else None
    fill = node.args[2] if len(node.args) > 2 else node.kwargs.get("value", 0)
    if (not isinstance(source, torch.Tensor) or not isinstance(pads, (list, tuple)) or len(pads) % 2
            or not all(isinstance(p, int) for p in pads) or len(pads) // 2 > source.dim()
            or not all(isinstance(n, int) for n in source.shape)):
        return None
    in_bytes = source.dtype == torch.bool
    if isinstance(fill, bool) or not isinstance(fill, (int, float)):
        if not (in_bytes and isinstance(fill, bool)):
            return None
    dtype = torch.uint8 if in_bytes else source.dtype
    fill_source = (str(int(bool(fill))) if in_bytes else repr(fill) if math.isfinite(fill)
                   else f"float({str(fill)!r})")
    result = f"torch.ops.aten._to_copy.default({args[0]}, dtype=torch.uint8)" if in_bytes else args[0]
    sizes = list(source.shape)
    for i in range(len(pads) // 2):
        dim = source.dim() - 1 - i
        before, after = pads[2 * i], pads[2 * i + 1]
        start, end = max(-before, 0), source.shape[dim] - max(-after, 0)
        if end <= start:
            return None  # all cropped: torch-mlir's padding of nothing fails too
        if start > 0 or end < source.shape[dim]:
            result = f"torch.ops.aten.slice.Tensor({result}, {dim}, {start}, {end})"
        sizes[dim] = end - start
    if not any(p > 0 for p in pads):
        result = f"torch.ops.aten.clone.default({result})"
        return f"torch.ops.aten.ne.Scalar({result}, 0)" if in_bytes else result
    # Note [Paddings as concatenations]
    for i in range(len(pads) // 2):
        dim = source.dim() - 1 - i
        before, after = max(pads[2 * i], 0), max(pads[2 * i + 1], 0)
        parts = []
        for width in (before, None, after):
            if width is None:
                parts.append(result)
            elif width > 0:
                shape = [*sizes[:dim], width, *sizes[dim + 1:]]
                parts.append(f"torch.ops.aten.full.default({shape}, {fill_source}, dtype={dtype}, "
                             "layout=torch.strided, device=_device, pin_memory=False)")
        if len(parts) > 1:
            result = f"torch.ops.aten.cat.default([{', '.join(parts)}], {dim})"
        sizes[dim] += before + after
    return f"torch.ops.aten.ne.Scalar({result}, 0)" if in_bytes else result


def _as_strided_reads_inside(node: Any) -> bool:
    """Whether as_strided_copy ``node`` reads only elements of its input's
    value, which is contiguous from storage offset 0 (Note [Ops torch-mlir
    folds or lowers wrongly])."""
    source = _meta_value(node.args[0])
    if not isinstance(source, torch.Tensor) or len(node.args) < 3 or node.kwargs:
        return False
    size, stride = node.args[1], node.args[2]
    offset = node.args[3] if len(node.args) > 3 else 0
    offset = source.storage_offset() if offset is None else offset
    numbers = [*size, *stride, offset, source.numel(), source.storage_offset()]
    if not all(isinstance(v, int) for v in numbers) or not source.is_contiguous() or source.storage_offset() != 0:
        return False
    if any(n == 0 for n in size):
        return True
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    return offset >= 0 and all(s >= 0 for s in stride) and last < source.numel()


# Note [Reductions of a 0-d tensor]
# A reduction of a 0-d tensor (sum, mean, amax, ...) is a linalg.generic
# without loops that adds its input to its output's initial value, and
# MLIR's elementwise fusion merges it into the loops of a consumer that
# broadcasts it: the addition then ran once per element of the consumer, so
# ``x.sum().expand(4)`` of 1.0 gave [1, 2, 3, 4], silently (the backward of
# cross-entropy over a single sample divided by 3 instead of 1). Such a
# reduction is the value itself in the result's dtype, and the program says
# so instead.
_SCALAR_REDUCTIONS = {"sum", "mean", "amax", "amin", "prod", "max", "min", "any", "all", "nansum"}


def _is_reduction_of_a_scalar(node: Any) -> bool:
    if _op_name(node) not in _SCALAR_REDUCTIONS or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    source, value = node.args[0].meta.get("val"), node.meta.get("val")
    return (isinstance(source, torch.Tensor) and isinstance(value, torch.Tensor)
            and source.dim() == 0 and value.dim() == 0)


def build_program(snodes: Iterable[Any], output_names: list[str], read_names: list[str],
                  unlisted_inputs: Iterable[str] = ()) -> Program:
    """The aten program of a fused group: ``output_names`` are the group's
    buffers needed outside it, ``read_names`` the buffers it reads;
    ``unlisted_inputs``: graph inputs it may also read where its program
    needs them (Note [Graph inputs a group needs but does not list])."""
    mapping = _buffer_fx_map()
    available: dict[torch.fx.Node, str] = {}
    for name in read_names:
        fx = _read_origin(name, mapping)
        if fx is not None:
            available.setdefault(_value_source(fx), name)
            # Note [Reads of a value under an identity view]
            while (fx := _identity_view_source(fx)) is not None:
                available.setdefault(_value_source(fx), name)
    unlisted: dict[torch.fx.Node, str] = {}
    for name in unlisted_inputs:
        if name in mapping and _value_source(mapping[name]) not in available:
            unlisted[_value_source(mapping[name])] = name
    outputs: list[torch.fx.Node] = []
    for name in output_names:
        if name not in mapping:
            raise UnmappableGroup(f"buffer {name} has no aten origin")
        fx = _value_source(mapping[name])
        if fx.op != "call_function" and fx not in available:
            raise UnmappableGroup(f"buffer {name} has no aten origin")
        outputs.append(fx)
    origins: set[torch.fx.Node] = set()
    for snode in snodes:
        origins |= set(getattr(snode.node, "origins", ()))

    inputs: list[torch.fx.Node] = []
    body: list[torch.fx.Node] = []
    done: set[torch.fx.Node] = set()
    empties: set[torch.fx.Node] = set()
    no_tensor: dict[torch.fx.Node, bool] = {}

    def need(n: torch.fx.Node, depth: int = 0) -> None:
        if n in done or _is_symbolic(n):
            # a size (a SymInt placeholder or sym_size): printed as its
            # expression, whose symbols become the kernel's size arguments
            return
        if depth > 2000:
            raise UnmappableGroup("program too deep")
        if n in unlisted and n not in available:
            available[n] = unlisted[n]
        if n in available and n not in outputs:
            inputs.append(n)
        elif (source := _passed_through(n)) is not None:
            need(source, depth + 1)  # Note [Values passed through control dependencies]
        elif n.op != "call_function":
            raise UnmappableGroup(f"{n.format_node()} is not among the group's inputs")
        elif _empty_shape(n) is not None:
            # Note [Empty values a group does not read]: also those it
            # computes, whose ops torch-mlir may not lower for no elements.
            body.append(n)
            empties.add(n)
        elif (n not in origins and n not in outputs and _op_name(n) not in _VIEW_OPS
              and n.target is not operator.getitem):
            if n in available:
                inputs.append(n)
            elif _empty_shape(n) is not None or _uninitialized_shape(n) is not None:
                body.append(n)  # Note [Empty values a group does not read]
                empties.add(n)
            elif _reads_no_tensor(n, no_tensor) or _copies_into_an_allocation(n):
                # Note [Index values computed from no tensor], Note [Copies
                # read their source only]
                for arg in _value_inputs(n):
                    need(arg, depth + 1)
                body.append(n)
            else:
                raise UnmappableGroup(f"{n.name} ({_op_name(n)}) is neither computed by the group nor read by it")
        else:
            for arg in _value_inputs(n):
                need(arg, depth + 1)
            body.append(n)
        done.add(n)

    # Note [Layout copies]: an output whose value the group reads is a copy
    # of that input.
    copies = [out for out in outputs if out in available]
    for out in copies:
        if out not in done:
            inputs.append(out)
            done.add(out)
    for out in outputs:
        need(out)
    for out in outputs:
        if out in inputs and out not in copies:
            raise UnmappableGroup(f"output {out.name} is also an input")

    printer = _Printer()
    names: dict[torch.fx.Node, str] = {}
    lines: list[str] = []
    for i, n in enumerate(inputs):
        names[n] = f"in{i}"
    # Note [Bool values of a program in bytes]: a bool value an op computes
    # is kept as uint8 (names[n] then holds bytes), read back as bool where
    # an op other than a view uses it.
    as_bool = {n: f"torch.ops.aten.ne.Scalar({name}, 0)" if _is_bool(n) else name for n, name in names.items()}
    op_names: list[str] = []
    # Note [Half-precision pointwise work in float32]: ``wide`` are the half
    # values computed in float32 (``w<i>``; ``v<i>`` is the value rounded
    # once), ``float32_names`` the sources ops computed in float32 read
    # their operands by (the half values the group reads or rounded
    # converted to float32 once, as ``u<k>``).
    wide: set[torch.fx.Node] = set()
    float32_names: dict[torch.fx.Node, str] = {}

    def float32_uses(n: torch.fx.Node) -> dict[torch.fx.Node, str]:
        for a in n.all_input_nodes:
            if _is_symbolic(a):
                continue
            a = _key(a, names)
            if a in float32_names:
                continue
            if _half_in_float32.is_half(a):
                float32_names[a] = f"u{len(float32_names)}"
                lines.append(f"    {float32_names[a]} = torch.ops.aten._to_copy.default({names[a]}, "
                             "dtype=torch.float32)")
            else:
                float32_names[a] = as_bool[a]
        return float32_names

    for i, n in enumerate(body):
        names[n] = f"v{i}"
        as_bool[n] = f"torch.ops.aten.ne.Scalar(v{i}, 0)" if _is_bool(n) else f"v{i}"
        if n in empties:
            dtype = torch.uint8 if _is_bool(n) else n.meta["val"].dtype  # Note [Bool values of a program in bytes]
            shape = _empty_shape(n) if _empty_shape(n) is not None else _uninitialized_shape(n)
            lines.append(f"    v{i} = torch.ops.aten.empty.memory_format({shape}, dtype={dtype}, "
                         "device=_device)")
            continue
        if n.target is operator.getitem:
            lines.append(f"    v{i} = {names[n.args[0]]}[{int(n.args[1])}]")
            if n.args[0] in wide:  # a part of a split computed in float32
                lines.append(f"    w{i} = {float32_names[n.args[0]]}[{int(n.args[1])}]")
                wide.add(n)
                float32_names[n] = f"w{i}"
            continue
        # ``op``: ``n`` with the overload it calls (``n`` stays the key of names).
        op = _with_overload(n) if isinstance(n.target, torch._ops.OpOverloadPacket) else n
        if not isinstance(op.target, torch._ops.OpOverload):
            raise UnmappableGroup(f"{n.format_node()} is not an aten op")
        is_view = _op_name(op) in _VIEW_OPS and _op_name(op) not in ("clone", "_to_copy")
        uses = names if is_view else as_bool
        if op.target is torch.ops.aten.copy.default:
            # Note [Copies read their source only]
            value = n.meta["val"]
            call = (f"torch.ops.aten._to_copy.default(torch.ops.aten.expand.default("
                    f"{printer.value(n.args[1], as_bool)}, {printer.value(list(value.shape), names)}), "
                    f"dtype={value.dtype})")
            if _is_bool(n):
                call = f"torch.ops.aten._to_copy.default({call}, dtype=torch.uint8)"
            lines.append(f"    v{i} = {call}")
            if "copy" not in op_names:
                op_names.append("copy")
            continue
        args = [printer.value(a, uses) for a in n.args]
        args += [f"{k}={printer.value(v, uses)}" for k, v in n.kwargs.items()]
        if not is_view and _half_in_float32.computed_in_float32(op):
            # Note [Half-precision pointwise work in float32]
            uses32 = float32_uses(n)
            wide_args, wide_kwargs = _half_in_float32.float32_dtype_arguments(op)
            args32 = [printer.value(a, uses32) for a in wide_args]
            args32 += [f"{k}={printer.value(v, uses32)}" for k, v in wide_kwargs.items()]
            lines.append(f"    w{i} = {_call(_half_in_float32.InFloat32(op), args32, uses32)}")
            lines.append(f"    v{i} = torch.ops.aten._to_copy.default(w{i}, dtype={n.meta['val'].dtype})")
            wide.add(n)
            float32_names[n] = f"w{i}"
            if _op_name(op) not in op_names:
                op_names.append(_op_name(op))
            continue
        if is_view and _is_view_of_float32(n, wide, names):
            # the same view of the value computed in float32
            uses32 = float32_uses(n)
            args32 = [printer.value(a, uses32) for a in n.args]
            args32 += [f"{k}={printer.value(v, uses32)}" for k, v in n.kwargs.items()]
            lines.append(f"    w{i} = {_call(op, args32, uses32)}")
            wide.add(n)
            float32_names[n] = f"w{i}"
        elif (_half_in_float32.converts_to_a_wide_type(op) and isinstance(n.args[0], torch.fx.Node)
              and _key(n.args[0], names) in wide):
            # .float() of a value computed in float32 reads that value
            uses32 = float32_uses(n)
            args = [printer.value(a, uses32) for a in n.args]
            args += [f"{k}={printer.value(v, uses32)}" for k, v in n.kwargs.items()]
        call = _call(op, args, uses)
        constant = _bool_constant_bytes(op) if not is_view else None
        if constant is not None:
            call = constant  # Note [Ops torch-mlir folds or lowers wrongly]
        elif _is_bool(n) and not is_view:
            call = f"torch.ops.aten._to_copy.default({call}, dtype=torch.uint8)"
        lines.append(f"    v{i} = {call}")
        if _op_name(op) not in _VIEW_OPS and _op_name(op) not in op_names:
            op_names.append(_op_name(op))
    results = []
    for o in outputs:
        if o in copies:
            lines.append(f"    c{len(results)} = torch.ops.aten.clone.default({_named(o, as_bool)})")
            results.append(f"c{len(results)}")
            if "copy" not in op_names:
                op_names.append("copy")
        else:
            results.append(_named(o, as_bool))
    symbols = list(printer.symbols)
    params = [names[n] for n in inputs] + symbols + ["_device"]
    # A group may leave nothing the graph reads: the checks of
    # _assert_async, which Inductor drops, of a 0-d input (one_hot's class
    # bounds) keep their group, with no output. Its program returns nothing
    # ("return (,)" did not parse).
    returned = f"    return ({', '.join(results)},)" if results else "    return ()"
    source = "\n".join([f"def program({', '.join(params)}):", *lines, returned, ""])
    return Program(source, [available[n] for n in inputs], list(output_names), symbols, op_names)


# Note [Reads of a value under an identity view]
# Inductor may realize a value under a view of it that changes nothing (an
# ``expand`` to its own shape, a ``view`` or ``reshape`` to it), and a group
# that needs the value itself then reads that buffer: the softmax backward
# of a checkpointed attention (DeepSeek-V3 with gradient checkpointing)
# reads its probabilities through the buffer of ``expand(probs, probs.shape)``,
# made for the recomputed bmm. The buffer holds the value element for
# element, so it is the value's input too; without this the group failed
# ("where (where) is neither computed by the group nor read by it").
_IDENTITY_VIEW_OPS = {"expand", "view", "_unsafe_view", "reshape", "alias"}


def _identity_view_source(n: torch.fx.Node) -> torch.fx.Node | None:
    """The node ``n`` is a view of, when that view keeps its shape and
    dtype (so the same elements in the same places), else None."""
    if n.op != "call_function" or _op_name(n) not in _IDENTITY_VIEW_OPS or not n.args:
        return None
    source = n.args[0]
    if not isinstance(source, torch.fx.Node):
        return None
    value, source_value = n.meta.get("val"), source.meta.get("val")
    if not (isinstance(value, torch.Tensor) and isinstance(source_value, torch.Tensor)):
        return None
    if value.shape != source_value.shape or value.dtype != source_value.dtype:
        return None
    return source


# Note [Reads of a buffer written through a view]
# A buffer that writes a view of another (Note [Writes into a view of a
# buffer] in _scheduling.py: diagonal_scatter reinplaced as a clone and a
# copy_ into its diagonal) holds, as its own value, what it writes (the
# copy_'s source, of the view's shape); but a group that reads it after the
# write reads the whole base with the view overwritten, under the
# mutation's name (the wrapper passes the base). In the graph that value is
# the base's FX node (``mul(clone, ...)`` after ``copy_(diagonal(clone),
# src)``), so such a read is matched with the base's node: matched with the
# copy_'s source, the program recomputed the base from the graph's inputs
# without the write (or failed when those were not at hand).
def _read_origin(name: str, mapping: dict[str, torch.fx.Node]) -> torch.fx.Node | None:
    """The FX node whose value a group that reads buffer ``name`` sees
    (Note [Reads of a buffer written through a view])."""
    from torch._inductor import ir

    try:
        layout = V.graph.get_buffer(name).get_layout()
    except Exception:  # a graph input or a name without a buffer
        layout = None
    if isinstance(layout, ir.MutationLayoutSHOULDREMOVE):
        target = layout.target
        while isinstance(target, ir.MutableBox):
            target = target.data
        if isinstance(target, ir.BaseView):
            return mapping.get(layout.get_buffer().get_name())
    return mapping.get(name)


# Note [Empty values a group does not read]
# Inductor computes nothing for a tensor without elements: the sum of an
# empty tensor is a constant, and the empty tensor's own buffer is written
# by a group of its own (or not at all). A group whose program reaches such
# a value through the aten ops of its origins (``sum(mul(x, y))`` with ``x``
# and ``y`` empty) neither computes nor reads it, yet needs only its shape
# and dtype: the program creates it empty, and so does not need the inputs
# it was computed from. The same holds for an empty value the group does
# compute: the program creates it empty too, which also keeps ops of no
# elements from torch-mlir (it divides by the element count when it lowers
# the reshape of an empty iota to [1, 0, 3]: SIGFPE, the process died).
# An allocation the group reads but does not compute (``new_empty_strided``,
# which AOTAutograd's contiguous copies write with ``copy``: DeepSeek-V3's
# attention backward) holds no value the program may depend on either: the
# program creates it empty too. Where such an allocation is filled by
# ``copy(allocation, source)`` (a dtype conversion the chunked
# linear_cross_entropy's half-precision backward spells so), Inductor inlines
# the copy into its readers without listing it among their origins: the
# program computes the copy from its source (Note [Copies read their source
# only]), as it would a pointwise op.
def _empty_shape(node: torch.fx.Node) -> list[int] | None:
    """The shape of ``node``'s value when that is a tensor without elements
    (of static shape), else None."""
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or not all(isinstance(s, int) for s in value.shape):
        return None
    return list(value.shape) if value.numel() == 0 else None


# Note [Copies read their source only]
# ``copy(destination, source)`` (functionalized ``destination.copy_(source)``)
# is the source broadcast to the destination's shape and converted to its
# dtype: no element of the destination survives. Inductor knows it, and a
# group that computes a copy does not read what the destination was computed
# from (the chunked linear_cross_entropy's half-precision backward overwrites
# a product with a slice of its input). So the program needs only the
# source, and computes the copy as expand and _to_copy.
def _value_inputs(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The nodes whose values ``node``'s value depends on."""
    if node.target is torch.ops.aten.copy.default and len(node.args) >= 2 and isinstance(node.args[1], torch.fx.Node):
        return [node.args[1]]
    return list(node.all_input_nodes)


def _copies_into_an_allocation(node: torch.fx.Node) -> bool:
    """Whether ``node`` is ``copy(allocation, source)`` filling the whole
    allocation: the source converted (and broadcast) to the allocation's
    dtype and shape, a value Inductor inlines into its readers (Note [Empty
    values a group does not read])."""
    if node.target is not torch.ops.aten.copy.default or len(node.args) < 2:
        return False
    destination = node.args[0]
    return isinstance(destination, torch.fx.Node) and _uninitialized_shape(destination) is not None


_ALLOCATIONS = ("empty.memory_format", "empty_strided.default", "new_empty_strided.default", "new_empty.default",
                "empty_like.default")


def _uninitialized_shape(node: torch.fx.Node) -> list[int] | None:
    """The shape of ``node``'s value when the node allocates a tensor of
    static shape without writing it (Note [Empty values a group does not
    read]), else None."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten" or \
            f"{target._opname}.{target._overloadname}" not in _ALLOCATIONS:
        return None
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or not all(isinstance(s, int) for s in value.shape):
        return None
    return list(value.shape)


# Note [Index values computed from no tensor]
# Inductor inlines a pointwise value into the loops that read it, also where
# the value is an index (interpolate's source rows, iota * scale converted
# to int64, unfold's window positions): the loops compute it from their
# indices and read nothing. But Inductor collects a buffer's origins from
# the lowered op's direct arguments only, not from a list of indices, so
# those values are not among the group's origins, and when the value is
# realized too (the backward needs it) the group does not read that buffer
# either. A value that reads no tensor at all (its inputs are, transitively,
# factories such as iota and full, and sizes) costs what Inductor's own
# inlined loops cost, so the program computes it instead of failing.
def _reads_no_tensor(node: torch.fx.Node, memo: dict[torch.fx.Node, bool]) -> bool:
    """Whether ``node`` is an aten op whose value is computed from no
    tensor (its inputs are, transitively, only ops without tensor inputs
    and sizes)."""
    if node in memo:
        return memo[node]
    memo[node] = False  # while visiting: a cycle reads something
    result = (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
              and not node.target._schema.is_mutable
              and torch.Tag.nondeterministic_seeded not in node.target.tags
              and all(_is_symbolic(arg) or _reads_no_tensor(arg, memo) for arg in node.all_input_nodes))
    memo[node] = result
    return result


def _key(n: torch.fx.Node, names: dict[torch.fx.Node, str]) -> torch.fx.Node:
    """The node ``n`` is named by in a program: ``n``, or the one whose
    value it passes on (Note [Values passed through control
    dependencies])."""
    while n not in names:
        source = _passed_through(n)
        if source is None:
            return n
        n = source
    return n


def _is_view_of_float32(n: torch.fx.Node, wide: set[torch.fx.Node], names: dict[torch.fx.Node, str]) -> bool:
    """Whether view ``n`` views a value computed in float32 (``wide``) as
    values of the same type (not a ``view.dtype``; Note [Half-precision
    pointwise work in float32])."""
    source = n.args[0] if n.args else None
    if not isinstance(source, torch.fx.Node) or _key(source, names) not in wide:
        return False
    value = n.meta.get("val")
    values = value if isinstance(value, (list, tuple)) else [value]
    dtype = _key(source, names).meta["val"].dtype
    return all(isinstance(v, torch.Tensor) and v.dtype == dtype for v in values)


class _WithOverload:
    """An FX node seen with another target (the graph is Inductor's and
    stays as it is)."""

    def __init__(self, node: torch.fx.Node, target: torch._ops.OpOverload) -> None:
        self._node = node
        self.target = target

    def __getattr__(self, name: str) -> Any:
        return getattr(self._node, name)


def _with_overload(node: torch.fx.Node) -> Any:
    """``node`` with its op packet resolved to the overload it calls. Some
    of Inductor's decompositions call a packet (``aten.clone`` in
    ``slice_scatter``'s); it is resolved when that is unambiguous: its one
    overload that is not an ``out=`` variant."""
    packet = node.target
    functional = [name for name in packet.overloads() if not name.startswith("out")]
    if len(functional) != 1:
        raise UnmappableGroup(f"{node.format_node()} calls the op packet {packet} with several overloads")
    return _WithOverload(node, getattr(packet, functional[0]))


# Note [Bool values of a program in bytes]
# A bool tensor that a kernel keeps in memory is a memref of i1, and once a
# loop over it is vectorised LLVM stores a vector of i1 as packed bits; a
# loop that reads it back at other positions (a broadcast, a reduction's
# accumulator) reads the wrong bits. So every bool value an op of a program
# computes is converted to uint8 at once, and converted back (``!= 0``)
# where an op other than a view reads it: a buffer MLIR materialises holds
# bytes, and where producer and consumer fuse the two conversions cost
# nothing. Views (their results are bytes when their input is) and the
# program's inputs and outputs are left as they are; the kernel's boundary
# is handled by kernel.py (Note [Bool tensors cross the kernel boundary as
# bytes]). The program computes the same values run eagerly.
def _bool_constant_bytes(node: Any) -> str | None:
    """The source of a bool ``full`` of static shape in bytes, computed so
    that torch-mlir does not fold it (Note [Ops torch-mlir folds or lowers
    wrongly]), else None."""
    value = node.meta.get("val")
    fill = node.args[1] if len(node.args) > 1 else None
    if (node.target is not torch.ops.aten.full.default or not _is_bool(node) or not isinstance(fill, bool)
            or not all(isinstance(d, int) for d in value.shape)):
        return None
    positions = (f"torch.ops.aten.view.default(torch.ops.prims.iota.default({max(value.numel(), 1)}, start=0, "
                 f"step=1, dtype=torch.int64, device=_device, requires_grad=False), {list(value.shape)})")
    compare = "ge" if fill else "lt"
    return f"torch.ops.aten._to_copy.default(torch.ops.aten.{compare}.Scalar({positions}, 0), dtype=torch.uint8)"


def _meta_value(arg: Any) -> Any:
    """The value (a fake tensor, a symbol, ...) an FX node argument stands
    for; None for a constant argument."""
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None


def _is_bool(node: Any) -> bool:
    value = _meta_value(node)
    return isinstance(value, torch.Tensor) and value.dtype == torch.bool


def compile_program(source: str) -> Any:
    """The program's function from its source."""
    scope: dict[str, Any] = {"torch": torch, **_math.scope(), **_lanes.scope(), **_random_numbers.scope()}
    exec(compile(source, "<npu kernel program>", "exec"), scope)  # noqa: S102
    return scope["program"]
