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
            program = build_program(snodes, outputs, reads)
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
        names = [real_name.get(n, n) for n in (*program.input_names, *program.output_names)]
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
