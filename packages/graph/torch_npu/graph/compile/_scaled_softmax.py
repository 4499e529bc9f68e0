"""Scaled softmaxes computed as eager computes them.

Note [Scaled softmax without the finite-rows guard]
For ``softmax(x / c)`` (attention's scores) Inductor's joint-graph patterns
replace ``x / c - amax(x / c)`` with ``(x * sign(c) - amax(x * sign(c))) / c``,
which scales once instead of twice, and, to keep the original expression's
behaviour for rows holding inf or nan, they keep both and pick one per row:
``where(all(isfinite(x / c), dim), stable, original)``. An npu kernel built
from these ops (Note [Kernels from the nodes' aten origins], _program.py)
then computes two amaxes, the finiteness test and its ``any`` over every
row: on the benchmark's attention scores (8x4x64x64) it took 0.26 ms where
ATen's ``_softmax`` takes 0.055 ms.

On npu the rewrite buys nothing: a program computes ``x / c`` once and
reads it in both loops, so there is no recomputation that could round
differently (the problem Inductor's rewrite solves for its own code
generators). This pass puts ``original`` back in place of the ``where``
(the rest becomes dead code), which is exactly what eager's ``_softmax``
computes: the same values on finite rows, and the same inf/nan behaviour
(a row of all -inf gives nan, a -inf entry gives 0) everywhere else. Only
the exact pattern is rewritten: a scalar scale c applied by ``div`` or
``mul``, the stable branch ``(x * sign(c) - amax(x * sign(c))) op |c|``, and
the guard testing the same values over the same dimensions.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx

aten = torch.ops.aten

_SCALES = (aten.div.Tensor, aten.mul.Tensor)
_ANDS = (aten.mul.Tensor, aten.logical_and.default, aten.bitwise_and.Tensor)
_ANYS = (aten.any.dims, aten.any.dim)


def _call(node: Any, *targets: Any) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


def _dims(node: torch.fx.Node, position: int) -> tuple[int, ...] | None:
    """The normalised dims argument of a keepdim reduction, or None."""
    value = node.args[0].meta.get("val")
    if not isinstance(value, torch.Tensor) or len(node.args) != position + 2 or node.args[position + 1] is not True:
        return None
    dims = node.args[position]
    dims = [dims] if isinstance(dims, int) else dims
    if not isinstance(dims, (list, tuple)) or not all(isinstance(d, int) for d in dims):
        return None
    return tuple(sorted(d % max(value.dim(), 1) for d in dims))


def _minus_amax(node: Any) -> tuple[torch.fx.Node, tuple[int, ...]] | None:
    """(v, dims) when ``node`` is ``v - amax(v, dims, keepdim=True)``."""
    if not _call(node, aten.sub.Tensor) or node.kwargs or len(node.args) != 2:
        return None
    value, amax = node.args
    if not _call(amax, aten.amax.default) or amax.kwargs or amax.args[0] is not value:
        return None
    dims = _dims(amax, 1)
    return None if dims is None else (value, dims)


def _all_finite(cond: Any) -> tuple[torch.fx.Node, tuple[int, ...]] | None:
    """(v, dims) when ``cond`` is ``all(isfinite(v), dims, keepdim=True)`` as
    the decompositions spell it: ``~any(~((v == v) & (|v| != inf)))``."""
    if not _call(cond, aten.logical_not.default):
        return None
    reduced = cond.args[0]
    if not _call(reduced, *_ANYS) or reduced.kwargs:
        return None
    dims = _dims(reduced, 1)
    inner = reduced.args[0]
    if dims is None or not _call(inner, aten.logical_not.default):
        return None
    both = inner.args[0]
    if not _call(both, *_ANDS) or len(both.args) != 2:
        return None
    eq, ne = both.args
    if _call(ne, aten.eq.Tensor):
        eq, ne = ne, eq
    if not _call(eq, aten.eq.Tensor) or eq.args[0] is not eq.args[1]:
        return None
    value = eq.args[0]
    if not _call(ne, aten.ne.Scalar) or ne.args[1] != math.inf:
        return None
    if not _call(ne.args[0], aten.abs.default) or ne.args[0].args[0] is not value:
        return None
    return value, dims


def _scaled(node: Any) -> tuple[Any, torch.fx.Node, float] | None:
    """(op, x, c) when ``node`` is ``op(x, c)``, op div or mul, c a number."""
    if not _call(node, *_SCALES) or node.kwargs or len(node.args) != 2:
        return None
    x, c = node.args
    if not isinstance(x, torch.fx.Node) or isinstance(c, bool) or not isinstance(c, (int, float)):
        return None
    return node.target, x, c


def _original_branch(where: torch.fx.Node) -> torch.fx.Node | None:
    """The ``original`` operand of a finite-rows guard (see the Note), or
    None when ``where`` is not exactly one."""
    if where.kwargs or len(where.args) != 3:
        return None
    cond, stable, original = where.args
    guarded = _all_finite(cond)
    plain = _minus_amax(original)
    if guarded is None or plain is None or guarded != plain:
        return None
    scaled = _scaled(plain[0])
    stable_scaled = _scaled(stable)
    if scaled is None or stable_scaled is None:
        return None
    op, x, c = scaled
    # The stable branch scales by |c| what it shifted times sign(c).
    if stable_scaled[0] is not op or stable_scaled[2] != abs(c):
        return None
    shifted = _minus_amax(stable_scaled[1])
    if shifted is None or shifted[1] != plain[1]:
        return None
    signed = shifted[0]
    sign = 1 if c >= 0 else -1
    if not _call(signed, aten.mul.Tensor) or signed.kwargs or signed.args != (x, sign):
        return None
    return original


def restore_scaled_softmax(graph: torch.fx.Graph) -> int:
    """Replaces every finite-rows guard of a scaled softmax with its
    original branch (Note [Scaled softmax without the finite-rows guard]);
    returns how many were replaced."""
    replaced = 0
    for node in list(graph.nodes):
        if not _call(node, aten.where.self):
            continue
        original = _original_branch(node)
        if original is None:
            continue
        node.replace_all_uses_with(original)
        graph.erase_node(node)
        replaced += 1
    if replaced:
        graph.eliminate_dead_code()
    return replaced
