"""One loop nest for the results of an elementwise kernel.

Note [One loop nest for an elementwise kernel's results]
Elementwise fusion (linalg-fuse-elementwise-ops) fuses a producer into its
consumer, but a value that is both a result and used by another result
keeps a loop nest of its own. A compiled Adam step's kernel was four loops
over the parameters (the new exp_avg, the new exp_avg_sq, the new
parameter, and a copy of it into place), each reading and writing memory
again. And the step-count arithmetic (two exp, a sqrt, two divisions) sat
inside the parameter loop, computed per element, because the 0-d load of
the step count was not hoisted past the loop's stores.

For such kernels two passes run on the affine loops:
- affine-loop-fusion, with no extra computation allowed
  (compute-tolerance=0), merges the loop nests over the same elements;
- affine-loop-invariant-code-motion moves what does not depend on the loop
  (that load, and the scalar arithmetic on it) in front of it.

Both passes reorder accesses only as their dependence analysis allows, and
that analysis takes two distinct memref values for two distinct buffers. So
they run only where that holds:
- the kernel is elementwise: its fused program has only linalg.generic ops
  whose iterators are all parallel, and elementwise named ops (fill, copy,
  transpose, broadcast, map);
- the loops access only whole buffers, the function's arguments and its own
  allocations, never a view of one (expand_shape, collapse_shape, subview,
  ...), only with affine loads and stores, and each at loop indices or
  constants, never at a computed index (affine.apply, i + k, 3 * i).
A reduction's lowering reads and writes its accumulator through two views of
one allocation, and with the passes on, softmax gave wrong results; so did
avg_pool3d, a named pooling op whose window reads are computed indices.
The in-place analysis (Note [Outputs written over their own inputs],
_in_place.py) reads the loops after the passes.
"""

from __future__ import annotations

import re

PIPELINE = ("builtin.module(func.func(affine-loop-fusion{compute-tolerance=0},"
            "affine-loop-invariant-code-motion))")
# Part of the kernel cache key (_mlir.PIPELINE): the passes, and which
# kernels they run on (bump the number when that changes).
CACHE_KEY = f"{PIPELINE} for-elementwise-kernels-of-whole-buffers-2"

# Ops that make a second memref value of a buffer, compute an index, or
# access a buffer other than with an affine load or store (a gather's
# memref.load, a copy).
_VIEW_OR_OTHER_ACCESS = re.compile(
    r"\bmemref\.(expand_shape|collapse_shape|subview|reinterpret_cast|cast|view|transpose|"
    r"extract_strided_metadata|load|store|copy)\b|\baffine\.(apply|if|min|max)\b")
# An affine access and its indices.
_AFFINE_ACCESS = re.compile(r"\baffine\.(?:load|store) [^\[]*\[([^\]]*)\]")
# An index that is a value (a loop index, a constant), not an expression.
_PLAIN_INDEX = re.compile(r"^%[\w.$-]+$")
# The linalg ops of an elementwise program.
_LINALG_OP = re.compile(r"(?<!#)\blinalg\.(\w+)")  # ops, not attributes (#linalg.type_fn<...>)
_ELEMENTWISE_LINALG = {"generic", "yield", "index", "fill", "copy", "transpose", "broadcast", "map"}


def is_elementwise(linalg_text: str) -> bool:
    """Whether the fused program (linalg on tensors) is elementwise: no
    reduction iterator and no linalg op but elementwise ones."""
    if "reduction" in linalg_text:
        return False
    return all(name in _ELEMENTWISE_LINALG for name in _LINALG_OP.findall(linalg_text))


def accesses_whole_buffers(loops_text: str) -> bool:
    """Whether the kernel's loops (after convert-linalg-to-affine-loops)
    touch only whole buffers, with affine loads and stores at loop indices
    or constants."""
    if _VIEW_OR_OTHER_ACCESS.search(loops_text) is not None:
        return False
    for indices in _AFFINE_ACCESS.findall(loops_text):
        for index in indices.split(","):
            index = index.strip()
            if index and _PLAIN_INDEX.match(index) is None:
                return False
    return True
