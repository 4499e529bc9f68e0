"""Scatter-like ops of npu graphs run as extern kernels.

Note [Scatters run as extern kernels]
Inductor lowers index_put, scatter and their variants to two buffers: one
holding the destination's initial value (a copy of the input, or zeros) whose
``origin_node`` is the scatter's FX node, and a Scatter node that then writes
(or accumulates) the values into it. Neither is the value of an aten op, so
neither can become an MLIR kernel (Note [Kernels from the nodes' aten
origins], _program.py): the embedding's backward (``_unsafe_masked_index_put_
accumulate``) stopped every compiled training step of a language model. The
npu post-grad pass (_passes.py) therefore replaces each such op with an op of
the ``npu_inductor`` namespace of the same schema that calls the aten op.
Inductor has no lowering for it and runs it as an extern kernel, the aten op
on the stream's device (as eager npu would), between the MLIR kernels.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

aten = torch.ops.aten

# Functional ops Inductor lowers to a Scatter node (its lowering.py), those
# this torch has.
_SCATTERS = tuple(
    getattr(getattr(aten, name), overload)
    for name, overload in (
        ("index_put", "default"),
        ("_unsafe_index_put", "default"),
        ("_unsafe_masked_index_put_accumulate", "default"),
        ("scatter", "src"),
        ("scatter", "value"),
        ("scatter", "reduce"),
        ("scatter", "value_reduce"),
        ("scatter_add", "default"),
        ("scatter_reduce", "two"),
    )
    if hasattr(aten, name) and hasattr(getattr(aten, name), overload)
)

_library: torch.library.Library | None = None
_externs: dict[Any, Any] = {}


def _extern_for(op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """The ``npu_inductor`` op with ``op``'s schema that runs ``op``."""
    global _library
    if op in _externs:
        return _externs[op]
    if _library is None:
        _library = torch.library.Library("npu_inductor", "DEF")
    schema = str(op._schema)
    name = op._schema.name.split("::", 1)[1]
    overload = op._schema.overload_name
    qualified = f"{name}.{overload}" if overload else name
    _library.define(qualified + schema[schema.index("("):])

    def run(*args: Any, **kwargs: Any) -> Any:
        return op(*args, **kwargs)

    # Every backend (npu, and Meta for fake tensors) runs the aten op.
    _library.impl(qualified, run, "CompositeExplicitAutograd")
    packet = getattr(torch.ops.npu_inductor, name)
    extern = getattr(packet, overload or "default")
    _externs[op] = extern
    return extern


def _define_all() -> None:
    # All at import: wrapper code loaded from Inductor's cache calls them in
    # a process whose post-grad pass never ran.
    for op in _SCATTERS:
        _extern_for(op)


_define_all()


def run_scatters_as_externs(graph: torch.fx.Graph) -> None:
    """Replaces every scatter-like op of ``graph`` with its ``npu_inductor``
    twin (Note [Scatters run as extern kernels])."""
    for node in graph.nodes:
        if node.op == "call_function" and node.target in _SCATTERS and _on_one_device(node):
            node.target = _extern_for(node.target)


def _on_one_device(node: torch.fx.Node) -> bool:
    """Whether every tensor ``node`` reads is on one device: aten's index ops
    accept indices on the CPU, an op of another namespace does not."""
    devices = set()
    for arg in node.all_input_nodes:
        value = arg.meta.get("val")
        if isinstance(value, torch.Tensor):
            devices.add(value.device)
    return len(devices) == 1
