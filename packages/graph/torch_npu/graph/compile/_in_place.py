"""Which outputs of a compiled kernel may be the very buffer of an input.

Note [Outputs written over their own inputs]
Note [Kernels that write their own inputs] (kernel.py) stages an output
whose storage an input shares: the kernel writes a fresh buffer, which is
copied into place afterwards, and such a kernel is not armed. That cost
compiled optimizer steps more than they saved (a compiled Adam step was
~1.14x slower than eager foreach Adam), although most of their kernels are
safe to run in place. Whether one is cannot be read from the aten program:
MLIR decides the loops, and a purely elementwise program still ran its
clone as a ``memref.copy`` after the loop that had already doubled the
tensor (``b = x.clone(); x.mul_(2)``). So it is decided from the kernel's
loops themselves (the module after ``convert-linalg-to-affine-loops`` and
the rewrites before vectorisation, the last form in which every memory
access is an op of its own), once per compiled kernel, and kept with it in
the cache (Note [MLIR kernel cache]).

Input ``a`` and output ``b`` (function arguments, inputs first) may be one
buffer when no load of ``a`` can run after a store of ``b`` to the same
element. The loops run in the order of the function body's top-level ops,
so with F the first top-level op that stores to ``b``:

- ``a`` is only loaded (``affine.load`` / ``memref.load``), and ``b`` only
  loaded and stored (``affine.load`` / ``affine.store``); any other use
  (a copy, a subview, a cast, a call) and the pair is not safe;
- loads of ``a`` in top-level ops before F are safe, whatever their index;
  none may be in a top-level op after F;
- inside F, every load of ``a`` and store of ``b`` is indexed by exactly
  the induction variables of the loops around it (outermost first, one per
  dimension, each ``0 to <that dimension>``, no other region around it):
  each such access then touches each element once, so the accesses of one
  element run in the order of their lines, and every load of ``a`` must
  come before F's first store of ``b``;
- ``b`` is loaded only after F's first store to it (in F's block, later in
  it, or in a top-level op after F), so it never reads ``a`` for itself.

Vectorisation keeps the order of a block's ops and widens its loads and
stores alike, the lowering after it does not merge or reorder loops, and
the function's arguments carry no ``noalias`` (checked on the final module:
LLVM could otherwise move a load past a store). Everything else (a
transposed, shifted, broadcast or gathered read of the written buffer, a
reduction over it, a copy of it) keeps the pair unsafe, and the output
staged. The caller decides per call whether an input and an output are the
same buffer (the same address, sizes and strides, contiguous), as the
analysis assumes.
"""

from __future__ import annotations

import re

_FUNC = re.compile(r"^\s*func\.func @\w+\((.*)\)")
_ARG = re.compile(r"(%arg\d+): memref<([^>]*)>")
_FOR_IDENTITY = re.compile(r"^\s*affine\.for (%[\w.$-]+) = 0 to (\d+) \{$")
_LOAD = re.compile(r"^\s*%[\w.$-]+ = (affine|memref)\.load (%[\w.$-]+)\[([^\]]*)\] : ")
_STORE = re.compile(r"^\s*affine\.store %[\w.$-]+, (%[\w.$-]+)\[([^\]]*)\] : ")
_NOALIAS = "noalias"


def _dims(memref_type: str) -> list[int] | None:
    """The static dimensions of ``memref<...>``'s body, None when any is dynamic."""
    parts = memref_type.split(",")[0].split("x")[:-1]
    if any(not p.isdigit() for p in parts):
        return None
    return [int(p) for p in parts]


def _count(line: str, name: str) -> int:
    return len(re.findall(re.escape(name) + r"(?![\w.$-])", line))


def _uses(line: str, name: str) -> bool:
    return _count(line, name) > 0


def in_place_pairs(loops_text: str, num_inputs: int, num_outputs: int) -> frozenset[tuple[int, int]]:
    """The (input, output) positions that may be one buffer when the kernel
    of ``loops_text`` (its affine loops) runs (Note [Outputs written over
    their own inputs])."""
    lines = loops_text.splitlines()
    start = next((k for k, line in enumerate(lines) if _FUNC.match(line)), None)
    if start is None:
        return frozenset()
    args = _ARG.findall(_FUNC.match(lines[start]).group(1))
    if len(args) != num_inputs + num_outputs or sum(1 for line in lines if _FUNC.match(line)) != 1:
        return frozenset()
    # Per line after the signature: its top-level op, and the loops around
    # it (an identity loop's (iv, bound), or None for any other region).
    placed: list[tuple[int, tuple[tuple[str, int] | None, ...], str]] = []
    stack: list[tuple[str, int] | None] = []
    top = -1
    for line in lines[start + 1:]:
        stripped = line.strip()
        if not stack and stripped == "}":
            break  # the function's end
        if not stack:
            top += 1
        opens = line.count("{") - line.count("}")
        if stripped.startswith("}"):
            stack.pop()
            if stripped.endswith("{"):
                stack.append(None)  # another region of the same op (an else)
            continue
        placed.append((top, tuple(stack), line))
        if opens > 0:
            match = _FOR_IDENTITY.match(line)
            stack.append((match.group(1), int(match.group(2))) if match and opens == 1 else None)
            stack.extend([None] * (opens - 1))
        elif opens < 0:
            return frozenset()  # a layout the analysis does not read
    pairs = set()
    for i in range(num_inputs):
        for j in range(num_outputs):
            a, a_type = args[i]
            b, b_type = args[num_inputs + j]
            if a_type == b_type and _dims(a_type) is not None and _safe(placed, a, b, _dims(a_type)):
                pairs.add((i, j))
    return frozenset(pairs)


def _identity(loops: tuple[tuple[str, int] | None, ...], indices: str, dims: list[int]) -> bool:
    """Whether ``indices`` are exactly the induction variables of ``loops``,
    one per dimension over all of it."""
    names = [p.strip() for p in indices.split(",") if p.strip()]
    if len(loops) != len(dims) or any(loop is None for loop in loops):
        return False
    return names == [loop[0] for loop in loops] and [loop[1] for loop in loops] == dims


def _safe(placed: list[tuple[int, tuple[tuple[str, int] | None, ...], str]], a: str, b: str,
          dims: list[int]) -> bool:
    # (kind, top-level op, loops, indices, line position, dialect) per access
    accesses = []
    for position, (top, loops, line) in enumerate(placed):
        uses_a, uses_b = _uses(line, a), _uses(line, b)
        if not (uses_a or uses_b):
            continue
        load, store = _LOAD.match(line), _STORE.match(line)
        if load and load.group(2) == a and not uses_b:
            accesses.append(("load a", top, loops, load.group(3), position, load.group(1)))
        elif load and load.group(2) == b and not uses_a and load.group(1) == "affine":
            accesses.append(("load b", top, loops, load.group(3), position, "affine"))
        elif store and store.group(1) == b and not uses_a and _count(line, b) == 1:
            accesses.append(("store b", top, loops, store.group(2), position, "affine"))
        else:
            return False
    stores = [x for x in accesses if x[0] == "store b"]
    if not stores:
        return True  # b is never written: nothing is written over a
    first = min(x[1] for x in stores)
    first_store = min(x[4] for x in stores if x[1] == first)
    for kind, top, loops, indices, position, dialect in accesses:
        if (kind == "load a" and top > first) or (kind == "load b" and top < first):
            return False
        if top != first:
            continue
        # Inside F: each access touches its own element once, so the loads
        # and stores of one element run in the order of their lines.
        if kind == "load b":
            if position < first_store:
                return False
        elif dialect != "affine" or not _identity(loops, indices, dims):
            return False
        elif kind == "load a" and position > first_store:
            return False
    return True


def has_noalias(final_text: str) -> bool:
    """Whether the final module tells LLVM that arguments do not alias
    (which would void the analysis: Note [Outputs written over their own
    inputs])."""
    return _NOALIAS in final_text
