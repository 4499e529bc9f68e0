"""Inductor's pointwise decompositions of float16 and bfloat16 npu values
are computed in float32.

Note [Pointwise decompositions of half values in float32]
Inductor decomposes a few pointwise ops into several pointwise aten ops of
the operands' type (``_POINTWISE_IN_HALF``): lerp is ``end - start`` and an
addition scaled by the weight. Inductor's own code generation keeps float32
between the fused steps, and eager (ATen's CPU kernel) computes lerp in
float32 and rounds once; but an npu kernel runs the steps as aten ops (Note
[Kernels from the nodes' aten origins], _program.py), each rounding its
result to the half type: the compiled float16 lerp of 40000 and -40000
by 0.3 was inf (their difference overflowed) where eager gives 16000. For
npu operands of a half type the decomposition is therefore traced on
float32 copies, and its result converted back to the half type, which is
what eager computes. (Dynamo's own split of ``addcdiv`` with a ``value``
into div, mul and add happens before any decomposition and stays: Note
[Half-precision reductions accumulate in float32], _half_sums.py.)
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from ._half_sums import HALF_DTYPES

aten = torch.ops.aten

# The decompositions of Inductor's table whose steps are pointwise ops of
# the operands' half type (found by probing compiled float16 and bfloat16
# programs; see the Note).
_POINTWISE_IN_HALF = (aten.lerp.Scalar, aten.lerp.Tensor)

_installed = False


def _in_float32(decomposition: Callable[..., Any]) -> Callable[..., Any]:
    def in_float32(*args: Any, **kwargs: Any) -> Any:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if kwargs or not tensors or any(t.device.type != "npu" or t.dtype not in HALF_DTYPES for t in tensors):
            return decomposition(*args, **kwargs)
        dtype = tensors[0].dtype
        widened = [a.to(torch.float32) if isinstance(a, torch.Tensor) else a for a in args]
        return decomposition(*widened).to(dtype)

    in_float32.npu_wrapped = decomposition  # type: ignore[attr-defined]
    return in_float32


def install() -> None:
    """Wrap the decompositions of ``_POINTWISE_IN_HALF`` in Inductor's table
    (Note [Pointwise decompositions of half values in float32]);
    idempotent."""
    global _installed
    if _installed:
        return
    import torch._inductor.decomposition as inductor_decompositions

    table = inductor_decompositions.decompositions
    for op in _POINTWISE_IN_HALF:
        if op in table:
            table[op] = _in_float32(table[op])
    # select_decomp_table usually returns a cached copy of the table.
    inductor_decompositions.fast_random_decomps.cache_clear()
    _installed = True
