"""Foreach ops of npu graphs as one op per tensor.

Note [Foreach ops one tensor at a time]
The multi-tensor optimizers (Adam, AdamW, SGD with momentum, ... with
``foreach=True``, their default on a device) call ``torch._foreach_*`` ops,
and ``torch.compile(optimizer.step)`` is how PyTorch documents compiling
them. Inductor lowers a foreach op to one buffer per list element, written
back into the parameters and states, whose origins name only the foreach
node (whose value is the whole list): no such buffer was the value of an
aten op, so no kernel's program could be built (Note [Kernels from the
nodes' aten origins], _program.py) and every compiled step failed with
"buffer ... has no aten origin". The npu post-grad pass (_passes.py)
therefore writes each foreach node over npu tensors as the aten op it
applies, once per element (and so are those over host scalars, the step
counts an optimizer keeps on the CPU, whose values npu kernels read):
``_foreach_add.List(xs, ys, alpha=a)``
becomes ``add(xs[i], ys[i], alpha=a)`` for each i, with list arguments
taken element by element and the others (a scalar, a step tensor) given to
every call; the ``getitem`` users then read the element's op. The
per-element overload is the one the dispatcher picks for those arguments.
Foreach ops whose non-list tensor argument holds per-element values (the
``scalars`` tensor of ``_foreach_addcmul.Tensor``) are left as they are.
``_foreach_maximum`` and ``_foreach_minimum`` with a scalar apply
``clamp_min`` and ``clamp_max`` (aten's ``maximum`` and ``minimum`` take
only tensors, as eager's foreach kernels know): ASGD's
``_foreach_maximum_(mus, 1.0)`` stayed a foreach node, whose program then
needed every element's inputs, and its compile failed.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

aten = torch.ops.aten

_PREFIX = "_foreach_"

# Arguments of a foreach schema whose one tensor holds a value per list
# element: not the same for every element, so not decomposed here.
_PER_ELEMENT_TENSORS = {"scalars"}
# Foreach ops with a scalar whose per-element op has another name.
_SCALAR_OPS = {("maximum", "Scalar"): "clamp_min", ("maximum", "ScalarList"): "clamp_min",
               ("minimum", "Scalar"): "clamp_max", ("minimum", "ScalarList"): "clamp_max"}


def _is_list_type(argument: Any) -> bool:
    return isinstance(argument.type, torch._C.ListType)


def _decomposed_here(value: Any) -> bool:
    """Whether a foreach result ``value`` is one this pass writes per
    element: npu tensors, or the host scalars (0-d CPU tensors) of an
    optimizer's step counts, whose values npu kernels read (a buffer of
    Inductor's host foreach has no aten origin either)."""
    return (isinstance(value, (list, tuple)) and len(value) > 0
            and all(isinstance(t, torch.Tensor) and (t.device.type == "npu" or (t.device.type == "cpu" and t.dim() == 0))
                    for t in value))


def _resolve(packet: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, tuple, dict] | None:
    """The overload of ``packet`` the dispatcher picks for one element's
    arguments, with those arguments. A foreach schema may take positionally
    what the per-element op takes as a keyword (``_foreach_addcmul``'s
    ``value``, ``_foreach_addcdiv.ScalarList``'s ``scalars``): the
    arguments past the op's positional ones then go to its keyword-only
    ones, in order."""
    def pick(call_args: list[Any], call_kwargs: dict[str, Any]) -> Any:
        fake_args, fake_kwargs = torch.fx.node.map_arg((call_args, call_kwargs), lambda n: n.meta["val"])
        try:
            return getattr(packet, torch._C._jit_resolve_packet(packet._qualified_op_name, *fake_args,
                                                                **fake_kwargs))
        except RuntimeError:
            return None

    overload = pick(args, kwargs)
    if overload is not None:
        return overload, tuple(args), kwargs
    schema = getattr(packet, packet.overloads()[0])._schema
    positional = sum(1 for a in schema.arguments if not a.kwarg_only)
    keyword_only = [a.name for a in schema.arguments if a.kwarg_only and a.name != "out"]
    extra = args[positional:]
    if not extra or len(extra) > len(keyword_only) or any(name in kwargs for name in keyword_only[:len(extra)]):
        return None
    args, kwargs = args[:positional], {**dict(zip(keyword_only, extra)), **kwargs}
    overload = pick(args, kwargs)
    return None if overload is None else (overload, tuple(args), kwargs)


def _element_calls(node: torch.fx.Node) -> list[tuple[Any, tuple, dict, torch.Tensor]] | None:
    """(overload, args, kwargs, fake result) of the aten op ``node``
    applies to each list element, or None when ``node`` is not decomposed
    here."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or not target._opname.startswith(_PREFIX):
        return None
    values = node.meta.get("val")
    if not _decomposed_here(values) or target._schema.is_mutable:
        return None
    name = target._opname[len(_PREFIX):]
    packet = getattr(aten, _SCALAR_OPS.get((name, target._overloadname), name), None)
    if packet is None:
        return None
    bound: list[tuple[Any, Any, bool]] = []  # (schema argument, value, is a keyword)
    for i, argument in enumerate(target._schema.arguments):
        if i < len(node.args):
            bound.append((argument, node.args[i], False))
        elif argument.name in node.kwargs:
            bound.append((argument, node.kwargs[argument.name], True))
    length = len(values)
    for argument, value, _ in bound:
        if _is_list_type(argument):
            if not isinstance(value, (list, tuple)) or len(value) != length:
                return None
        elif argument.name in _PER_ELEMENT_TENSORS:
            return None
    calls = []
    for i in range(length):
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for argument, value, is_keyword in bound:
            element = value[i] if _is_list_type(argument) else value
            if is_keyword:
                kwargs[argument.name] = element
            else:
                args.append(element)
        resolved = _resolve(packet, args, kwargs)
        if resolved is None:
            return None
        overload, args, kwargs = resolved
        fake_args, fake_kwargs = torch.fx.node.map_arg((args, kwargs), lambda n: n.meta["val"])
        expected = values[i]
        try:
            with torch._guards.detect_fake_mode([expected]):
                result = overload(*fake_args, **fake_kwargs)
        except Exception:  # noqa: BLE001 - not the same op after all: leave it
            return None
        if (not isinstance(result, torch.Tensor) or result.dtype != expected.dtype
                or result.shape != expected.shape):
            return None
        calls.append((overload, args, kwargs, result))
    return calls


def decompose_foreach_ops(graph: torch.fx.Graph) -> None:
    """Rewrites each foreach node over npu tensors whose users all take
    one element as the per-element aten ops (Note [Foreach ops one tensor
    at a time])."""
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if not all(user.target is operator.getitem for user in node.users):
            continue
        calls = _element_calls(node)
        if calls is None:
            continue
        items = []
        with graph.inserting_before(node):
            for overload, args, kwargs, result in calls:
                item = graph.call_function(overload, args, kwargs)
                item.meta["val"] = result
                items.append(item)
        for user in list(node.users):
            user.replace_all_uses_with(items[user.args[1]])
            graph.erase_node(user)
        graph.erase_node(node)
