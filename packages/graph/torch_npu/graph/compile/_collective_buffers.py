"""The values of buffers that functional collectives write in place.

Note [Buffers of functional collectives]
Inductor lowers several of torch's functional collectives
(``_c10d_functional``, which DTensor, tensor parallelism and traced
``torch.distributed`` calls produce) in place on a buffer: ``all_reduce``
and ``broadcast`` clone their input into a new buffer and reduce (or
broadcast) into it, ``*_out`` variants write their ``out=``, ``irecv``
receives into its argument, and ``wait_tensor`` returns its argument after
marking it "mutated" so that later readers are ordered after the wait.
So one buffer holds two values in turn: the value its own kernel computes
(the collective's input) and, once the collective and its wait have run,
the collective's result. Inductor names the buffer after the last FX node
that returned it (``wait_tensor``), and readers after the collective read
it through the name of the collective's (or wait's) mutation.

A group's program must therefore see:
- the buffer's own kernel computing the collective's *input*
  (:func:`value_before_collectives`);
- a reader after the collective reading the *result*, the FX node of the
  collective or wait whose mutation it reads (:func:`mutation_result`).
Without the second, a group reading the result could not be expressed and
every compiled function with a functional collective failed ("wait_tensor
is neither computed by the group nor read by it"). Without the first, the
kernel's program, asked for the ``wait_tensor`` node's value, recomputed
the collective itself: the all-reduce ran eagerly inside the kernel and
again in the wrapper, giving twice the sum.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

_NAMESPACE = "_c10d_functional"

# Functional collectives whose Inductor lowering returns the buffer of an
# argument it writes in place: op name -> the argument (a position, or the
# keyword of an ``out=``).
_IN_PLACE_ARGUMENT: dict[str, int | str] = {
    "wait_tensor": 0,
    "all_reduce": 0,
    "all_reduce_": 0,
    "broadcast": 0,
    "broadcast_": 0,
    "irecv": 0,
    "all_gather_into_tensor_out": "out",
    "reduce_scatter_tensor_out": "out",
}

# Coalesced collectives, read through ``getitem``, that write their i-th
# input in place.
_COALESCED_IN_PLACE = {"all_reduce_coalesced", "all_reduce_coalesced_"}


def _functional_collective(node: Any) -> str | None:
    """The op name of a ``_c10d_functional`` call node, else None."""
    target = getattr(node, "target", None)
    if getattr(node, "op", None) != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return None
    return target._opname if target.namespace == _NAMESPACE else None


def _written_argument(node: torch.fx.Node) -> torch.fx.Node | None:
    """The node whose buffer ``node`` (a functional collective, or a
    ``getitem`` of a coalesced one) writes in place and returns, else None."""
    if node.target is operator.getitem:
        source, index = node.args
        if _functional_collective(source) in _COALESCED_IN_PLACE and isinstance(index, int):
            inputs = source.args[0]
            return inputs[index] if isinstance(inputs, (list, tuple)) and index < len(inputs) else None
        return None
    argument = _IN_PLACE_ARGUMENT.get(_functional_collective(node) or "")
    if argument is None:
        return None
    value = node.kwargs.get(argument) if isinstance(argument, str) else (
        node.args[argument] if argument < len(node.args) else None)
    return value if isinstance(value, torch.fx.Node) else None


def value_before_collectives(node: torch.fx.Node) -> torch.fx.Node:
    """The value a computed buffer's own kernel writes when Inductor named
    the buffer after ``node``: ``node`` itself, or, when ``node`` is a
    collective (or its wait) that writes that buffer in place afterwards,
    the collective's input (Note [Buffers of functional collectives])."""
    seen = 0
    while (written := _written_argument(node)) is not None and seen < 64:
        node, seen = written, seen + 1
    return node


def mutation_result(buffer: Any) -> torch.fx.Node | None:
    """The value a buffer holds after the functional collective (or wait)
    whose in-place write it names, when ``buffer`` is such a mutation: the
    collective's FX node among the buffer's origins, else None (Note
    [Buffers of functional collectives])."""
    if not buffer.get_mutation_names():
        return None
    overload = getattr(getattr(buffer, "mutating_node", None), "op_overload", None)
    if not isinstance(overload, torch._ops.OpOverload) or overload.namespace != _NAMESPACE:
        return None
    # The origins name the functional op (``all_reduce``) whose in-place
    # form (``all_reduce_``) the kernel runs.
    written = overload._opname.rstrip("_")
    candidates = [n for n in getattr(buffer, "origins", ())
                  if (_functional_collective(n) or "").rstrip("_") == written]
    # A coalesced collective's node is a list of results: such a buffer
    # stays unmapped (its readers read the waits of its items).
    if len(candidates) != 1 or not isinstance(candidates[0].meta.get("val"), torch.Tensor):
        return None
    return candidates[0]
