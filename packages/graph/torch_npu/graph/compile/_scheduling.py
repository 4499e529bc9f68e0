"""Inductor's scheduling backend for npu: fused groups become MLIR kernels.

See Note [Kernels from the nodes' aten origins] (_program.py).
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import sympy
import torch
from torch._inductor import config
from torch._inductor.scheduler import BaseScheduling, BaseSchedulerNode, FusedSchedulerNode, SchedulerNode
from torch._inductor.utils import sympy_product
from torch._inductor.virtualized import V

from ._program import Program, UnmappableGroup, build_program

# Fusing more than this many scheduler nodes into one kernel makes its
# compile slow for little gain.
MAX_FUSED_NODES = 24


def _group_io(snodes: Sequence[BaseSchedulerNode]) -> tuple[list[str], list[str], list[str]]:
    """(outputs, internal buffers, reads) of a group of scheduler nodes."""
    members = set(snodes)
    produced: list[str] = []
    outputs: list[str] = []
    graph_outputs = set(V.graph.get_output_names())
    for snode in snodes:
        for buf in snode.get_outputs():
            name = buf.get_name()
            produced.append(name)
            # A buffer that mutates another (an input's copy_) is always
            # written: the mutation is the point, whoever reads it.
            used_outside = name in graph_outputs or bool(buf.node.get_mutation_names()) or any(
                user.node not in members for user in buf.users
            )
            if used_outside:
                outputs.append(name)
    internal = [n for n in produced if n not in outputs]
    reads: list[str] = []
    for snode in snodes:
        for dep in snode.read_writes.reads:
            if dep.name not in produced and dep.name not in reads:
                reads.append(dep.name)
    return outputs, internal, reads


# Note [Graph inputs a group needs but does not list]
# A group's program recomputes its buffers from their aten origins (Note
# [Kernels from the nodes' aten origins]), and Inductor's own lowering of
# an op may not read an input the aten op takes: argmax of a 0-d tensor is
# the constant 0; slice_scatter and adaptive_max_pool3d's indices are
# computed from other buffers or index arithmetic. The program then needs
# a tensor the group does not list among its reads. When that tensor is a
# graph input, it holds its value for the whole graph unless the graph
# mutates it, and is alive until the wrapper frees it after its last
# listed reader. So, only when a group cannot be built from its listed
# reads, and only when it is generated (the wrapper's lines so far show
# which inputs are already freed), its program may also read the graph
# inputs that are neither freed nor mutated. Fusion decisions use the
# listed reads alone, so the extra inputs never make a group larger.
def _unlisted_graph_inputs(reads: Sequence[str]) -> list[str]:
    """Graph inputs a group generated now may read besides ``reads``."""
    from torch._inductor import ir
    from torch._inductor.codegen.wrapper import FreeLine

    freed = {line.node.get_name() for line in V.graph.wrapper_code.lines if isinstance(line, FreeLine)}
    mutated = {name for buf in V.graph.buffers for name in buf.get_mutation_names()}
    mutated |= set(getattr(V.graph, "mutated_inputs", ()))
    return [name for name, value in V.graph.graph_inputs.items()
            if isinstance(value, ir.TensorBox) and name not in reads and name not in freed
            and name not in mutated]


# Note [Writes into a view of a buffer]
# Inductor lowers a scatter into a view (diagonal_scatter, slice_scatter,
# as_strided_scatter, the backward of diagonal or as_strided) as a clone of
# the base followed by a buffer that writes the view: its layout is a
# MutationLayoutSHOULDREMOVE whose target is a view of the base (a
# ReinterpretView or a GenericView such as diagonal's), and its value, the
# one its program computes, has the view's shape. Its kernel is therefore
# given that view as its output, not the whole base: the kernel writes the
# view's elements and the rest of the base keeps its values (kernel.py
# writes a strided output through a contiguous copy). The view is the
# target's indexer, which must be linear in the view's indices (sizes,
# strides and an offset); a view that is not (none of Inductor's scatter
# lowerings makes one) stays unmapped: its group cannot be compiled.
def _written_view(name: str) -> str | None:
    """The wrapper's expression of the view of another buffer that buffer
    ``name`` writes, else None."""
    from torch._inductor import ir

    try:
        layout = V.graph.get_buffer(name).get_layout()
    except Exception:
        return None
    if not isinstance(layout, ir.MutationLayoutSHOULDREMOVE):
        return None
    target = layout.target
    while isinstance(target, ir.MutableBox):
        target = target.data
    if not isinstance(target, ir.BaseView):
        return None
    base = layout.get_buffer()
    size = list(target.get_size())
    index = [sympy.Symbol(f"npu_view{k}", integer=True, nonnegative=True) for k in range(len(size))]
    flat = sympy.expand(target.make_indexer()(index))
    strides = [sympy.diff(flat, var) for var in index]
    if any(stride.free_symbols & set(index) for stride in strides):
        raise UnmappableGroup(f"buffer {name} writes a view of {base.get_name()} that is not strided")
    offset = flat.subs({var: 0 for var in index})
    view = ir.ReinterpretView(data=base, layout=ir.FixedLayout(base.get_device(), base.get_dtype(), size,
                                                                strides, offset))
    return view.codegen_reference()


def _try_program(snodes: Sequence[BaseSchedulerNode]) -> Program | None:
    outputs, _, reads = _group_io(snodes)
    try:
        return build_program(snodes, outputs, reads)
    except UnmappableGroup:
        return None


class MLIRScheduling(BaseScheduling):
    """Fuses Inductor's pointwise and reduction nodes into groups and emits
    one ``mlir_fused_<ops>_<n>`` kernel per group."""

    def __init__(self, scheduler: Any) -> None:
        super().__init__(scheduler)
        # Kernel numbers restart with each graph's wrapper module.
        self._kernel_counter = itertools.count()

    def get_backend_features(self, device: torch.device) -> Any:
        from torch.utils._ordered_set import OrderedSet

        return OrderedSet()

    def group_fn(self, sizes: Sequence[Sequence[sympy.Expr]]) -> tuple[sympy.Expr, ...]:
        return tuple(V.graph.sizevars.simplify(sympy_product(s)) for s in sizes)

    def _can_fuse(self, node1: BaseSchedulerNode, node2: BaseSchedulerNode) -> bool:
        if node1.is_template() or node2.is_template():
            return False
        if node1.is_extern() or node2.is_extern():
            return False
        snodes = [*node1.get_nodes(), *node2.get_nodes()]
        if len(snodes) > MAX_FUSED_NODES:
            return False
        if not all(isinstance(n, SchedulerNode) for n in snodes):
            return False
        return _try_program(snodes) is not None

    def can_fuse_vertical(self, node1: BaseSchedulerNode, node2: BaseSchedulerNode) -> bool:
        return self._can_fuse(node1, node2)

    def can_fuse_horizontal(self, node1: BaseSchedulerNode, node2: BaseSchedulerNode) -> bool:
        return self._can_fuse(node1, node2)

    def codegen_template(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("npu has no template kernels")

    def codegen_node(self, node: FusedSchedulerNode | SchedulerNode) -> None:
        snodes = node.get_nodes()
        outputs, internal, reads = _group_io(snodes)
        try:
            try:
                program = build_program(snodes, outputs, reads)
            except UnmappableGroup:
                # Note [Graph inputs a group needs but does not list]
                program = build_program(snodes, outputs, reads, _unlisted_graph_inputs(reads))
        except UnmappableGroup as e:
            names = ", ".join(n.get_name() for n in snodes)
            raise NotImplementedError(
                f"torch.compile for npu: the scheduler nodes {names} cannot be expressed as aten ops "
                f"({e}); please report this with the model that produced it"
            ) from e
        wrapper = V.graph.wrapper_code
        ops = "_".join(program.op_names[:4]) or "copy"
        kernel_name = f"mlir_fused_{ops}_{next(self._kernel_counter)}"
        for name in internal:
            V.graph.removed_buffers.add(name)
        # Inductor would reuse a dead input's memory for an output when its
        # loop-level analysis allows it; the MLIR kernel's loops are not
        # Inductor's, so outputs always get their own memory.
        with config.patch(inplace_buffers=False):
            for snode in snodes:
                snode.mark_run()
        wrapper.header.writeline(
            f"{kernel_name} = MLIRKernel({kernel_name!r}, {program.source!r}, "
            f"{len(program.input_names)}, {len(program.output_names)}, {len(program.symbols)})"
        )
        device = snodes[0].get_device()
        # A mutation's buffer is the mutated buffer under another name; the
        # wrapper knows it by the real one.
        real_name = V.graph.scheduler.mutation_real_name
        names = [real_name.get(n, n) for n in program.input_names]
        names += [_written_view(n) or real_name.get(n, n) for n in program.output_names]
        args = [*names, *program.symbols]
        wrapper.generate_kernel_call(kernel_name, args, device=device, triton=False)
        self.free_buffers_in_scheduler()

    def codegen_sync(self) -> None:
        V.graph.wrapper_code.writeline(V.graph.device_ops.synchronize())

    def flush(self) -> None:
        pass

    def ready_to_flush(self) -> bool:
        return False

    def benchmark_fused_nodes(self, nodes: Sequence[BaseSchedulerNode]) -> tuple[float, str]:
        raise NotImplementedError("npu kernels are not benchmarked at compile time")
