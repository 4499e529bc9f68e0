"""Which float16 / bfloat16 values of a program are computed in float32.

Note [Half-precision pointwise work in float32]
A program runs a fused group's aten ops one after the other (Note [Kernels
from the nodes' aten origins], _program.py), and each op of a float16 or
bfloat16 result rounded that result to the half type. Eager npu (ATen's
CPU kernels) rounds once per op too, but an op is often several ops by the
time it reaches a program: Dynamo splits ``addcdiv(a, b, c, value=v)`` into
div, mul and add, Inductor's decompositions split lerp, the activations'
backwards and the norms, and a user's own chain ``(x * 1000) * (y / 1000)``
is fused into one kernel. Every such split rounded where eager does not: of
float16, a quotient ``b / c`` above 65504 was inf where ``v * b / c`` is
not and eager gives a finite value; each step of a bfloat16 chain lost bits
(8 significant bits per rounding). Inductor's own code generation computes
the whole fused body in float32: it converts half values to float32 where
it loads them and rounds once where it stores a buffer. A program does the
same:

- a pointwise op (``torch.Tag.pointwise``) of a half result with an
  operand of that type, a reduction that accumulates in float32 (Note
  [Half-precision reductions accumulate in float32], _half_sums.py), and a
  view, ``getitem`` or clone of such a value are computed on float32
  operands into a float32 value (``w<i>``, :func:`computed_in_float32`):
  half operands the group reads are converted (exactly) to float32 once,
  those it computed are already float32; a number operand is a float32
  number, as in eager's opmath (this supersedes rounding only the numbers
  the half type cannot hold, and Inductor's lerp decomposition traced in
  float32);
- the value of the half type (``v<i>``) is that float32 value rounded once:
  it is what the group stores (its outputs) and what every other op reads,
  so a value that leaves the group, or goes into an op that is not listed
  above (an index, a concatenation, a padding, an extern op), rounds where
  a buffer of Inductor's would;
- a conversion of such a value to float32 or float64 (the decompositions
  of softmax, the norms and GELU start with one, and so does ``.float()``)
  reads the float32 value, as Inductor's kernels do (its ``to_dtype`` of a
  float32 value to float32 is nothing);
- an explicit conversion to a half type (``x.half()`` of a float32 value,
  or a decomposition's conversion of its float32 result back) is not
  computed in float32: it rounds, so a user's ``.to(torch.float16)`` in the
  middle of a function keeps eager's value. Here the program is stricter
  than Inductor's defaults: Triton's ``to_dtype`` of a half type converts
  to the compute type (float32) unless ``config.emulate_precision_casts``,
  and the C++ backend's dtype-conversion cache skips the round trip, so
  their fused kernels drop a user's rounding; eager npu keeps it, and a
  compiled result that differs from eager for a conversion the user wrote
  on purpose is the kind of silent difference issue 19 is about.

It is also faster: LLVM has no bfloat16 arithmetic and rounded each op's
float32 result back to bfloat16 in software; a compiled bfloat16 chain of
eleven pointwise ops on 4M elements took half the time it took rounded per
op (about 27 ms for 53 ms on the simulator's CPU, a shared machine). The
half-typed ``v<i>`` no op reads are dead code MLIR removes.

Ops whose result depends on the type they are computed in stay in the half
type (``_OWN_TYPE``): nextafter (the next half number, not the next float32
one), nan_to_num (its default bounds are the type's largest numbers), and
the conversions themselves; so do random ops. Integers, bools, float32 and
float64 programs are unchanged: no value of theirs is of a half type.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ._half_sums import HALF_DTYPES, accumulates_in_half

# Note [Half-precision pointwise work in float32]: pointwise ops whose
# result depends on the type they are computed in.
_OWN_TYPE = frozenset({"nextafter", "nan_to_num", "convert_element_type", "_to_copy"})

# Conversions that read the float32 value of a half value computed so.
_CONVERSIONS = (torch.ops.prims.convert_element_type.default, torch.ops.aten._to_copy.default)


def _value(arg: Any) -> Any:
    return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None


def is_half(arg: Any) -> bool:
    """Whether ``arg`` is an FX node whose value is a float16 / bfloat16
    tensor."""
    value = _value(arg)
    return isinstance(value, torch.Tensor) and value.dtype in HALF_DTYPES


def computed_in_float32(node: Any) -> bool:
    """Whether ``node`` (an op of a program, not a view) is a pointwise op
    or an accumulating reduction whose half-type result a program computes
    in float32 (Note [Half-precision pointwise work in float32])."""
    target = node.target
    value = node.meta.get("val")
    if (not isinstance(target, torch._ops.OpOverload) or not isinstance(value, torch.Tensor)
            or value.dtype not in HALF_DTYPES or node.kwargs.get("out") is not None):
        return False
    if accumulates_in_half(node):
        return True
    if (torch.Tag.pointwise not in target.tags or torch.Tag.nondeterministic_seeded in target.tags
            or target._opname in _OWN_TYPE):
        return False
    halves = [a for a in node.all_input_nodes if is_half(a)]
    return bool(halves) and all(_value(a).dtype == value.dtype for a in halves)


def converts_to_a_wide_type(node: Any) -> bool:
    """Whether ``node`` converts a value to float32 or float64 (which, of a
    value computed in float32, reads that float32 value: Note
    [Half-precision pointwise work in float32])."""
    if node.target not in _CONVERSIONS or not node.args:
        return False
    dtype = node.args[1] if len(node.args) > 1 else node.kwargs.get("dtype")
    return dtype in (torch.float32, torch.float64)


def float32_dtype_arguments(node: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``node``'s arguments with its result's half type (a reduction's
    ``dtype=``) made float32."""
    half = node.meta["val"].dtype

    def widened(a: Any) -> Any:
        return torch.float32 if a == half and isinstance(a, torch.dtype) else a

    return tuple(widened(a) for a in node.args), {k: widened(v) for k, v in node.kwargs.items()}


def _float32_like(value: Any) -> Any:
    """A fake tensor like ``value`` of dtype float32 (tuples elementwise)."""
    if isinstance(value, (tuple, list)):
        return type(value)(_float32_like(v) for v in value)
    if not isinstance(value, torch.Tensor) or value.dtype not in HALF_DTYPES:
        return value
    fake_mode = getattr(value, "fake_mode", None)
    if fake_mode is None:
        return torch.empty_strided(value.shape, value.stride(), dtype=torch.float32, device="meta")
    with fake_mode:
        return torch.empty_strided(value.shape, value.stride(), dtype=torch.float32, device=value.device)


class _SeenInFloat32:
    """An FX node whose value is seen as float32: it hashes and compares as
    the node, which stays the key of a program's names (the graph is
    Inductor's and stays as it is), and passes for a torch.fx.Node."""

    def __init__(self, node: Any) -> None:
        self._node = node
        self.meta = {**node.meta, "val": _float32_like(node.meta.get("val"))}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._node, name)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # isinstance(self, torch.fx.Node) holds: the rewrites check it.
        return torch.fx.Node

    def __hash__(self) -> int:
        return hash(self._node)

    def __eq__(self, other: object) -> bool:
        return other is self._node or (isinstance(other, _SeenInFloat32) and other._node is self._node)


class InFloat32(_SeenInFloat32):
    """An FX node seen as computed in float32: its value and those of its
    half operands are float32, so the rewrites of ``_program._call`` (math
    forms, reductions in lanes) see the types the program computes in."""

    def __init__(self, node: Any) -> None:
        super().__init__(node)
        args, kwargs = float32_dtype_arguments(node) if is_half(node) else (node.args, node.kwargs)
        self.args = torch.fx.node.map_aggregate(args, _seen_in_float32)
        self.kwargs = torch.fx.node.map_aggregate(kwargs, _seen_in_float32)


def _seen_in_float32(a: Any) -> Any:
    return _SeenInFloat32(a) if is_half(a) else a
