"""Memory accesses that step through memory other than one element per
iteration are kept out of vectorised loops.

Note [Strided accesses are not vectorised]
``affine-super-vectorize`` (in the MLIR of torch-mlir's wheel) decides that
an access is contiguous along a loop when exactly one of its indices varies
with the loop's induction variable, without looking at how it varies: a
window of a strided pooling, ``x[.., 3 * i + k]``, became a
``vector.transfer_read`` of 16 consecutive elements from ``3 * i + k``, so
``avg_pool1d(x, 3)`` averaged the wrong elements, silently (compiled
[1, 2, 3] where eager gives [1, 4, 7]).

So after the kernel's loops are affine loops and before they are
vectorised, every ``affine.load`` and ``affine.store`` with an index whose
affine expression is not linear in the loops' induction variables with
coefficients 0 or 1 (a multiple, a floordiv, a mod or a ceildiv of one)
becomes a ``memref.load`` or ``memref.store`` of the same indices. The
vectoriser cannot widen those (their indices are scalars of the loop), so
it leaves every loop around them scalar, which is correct; loops without
such accesses vectorise as before. An index the rewrite cannot read (an
expression written into the access itself, a map it did not see) makes the
kernel run its aten ops eagerly (MLIRCompileError), rather than risk the
misread. Like Note [Bool buffers of a kernel in bytes], the rewrite is
textual and the module is parsed again.
"""

from __future__ import annotations

import re
from typing import Any

import sympy


class StridedAccessError(RuntimeError):
    """An access whose index the rewrite cannot analyse."""


_MAP_ALIAS = re.compile(r"^(#map\d*) = affine_map<(.*)>$")
_FOR = re.compile(r"affine\.for (%[\w.$-]+) = ")
_APPLY = re.compile(r"^\s*(%[\w.$-]+) = affine\.apply (#map\d*|affine_map<.*?>)\(([^)]*)\)(?:\[([^\]]*)\])?\s*$")
_LOAD = re.compile(r"^(\s*%[\w.$-]+ = )affine\.load (%[\w.$-]+)\[([^\]]*)\] : (.*)$")
_STORE = re.compile(r"^(\s*)affine\.store (%[\w.$-]+), (%[\w.$-]+)\[([^\]]*)\] : (.*)$")
_VALUE = re.compile(r"^%[\w.$-]+$")
_NONLINEAR = ("floordiv", "ceildiv", "mod")


def _steps_by_one(map_body: str, operands: list[str], ivs: set[str]) -> bool:
    """Whether the single result of ``(dims)[syms] -> (expr)`` moves by 0 or
    1 per step of each induction variable among its operands."""
    match = re.fullmatch(r"\(([^)]*)\)(?:\[([^\]]*)\])? -> \((.*)\)", map_body.strip())
    if match is None:
        raise StridedAccessError(f"an affine map the rewrite does not read: {map_body}")
    names = [d.strip() for d in match.group(1).split(",") if d.strip()]
    names += [s.strip() for s in (match.group(2) or "").split(",") if s.strip()]
    expr = match.group(3)
    if "," in expr or len(names) != len(operands):
        raise StridedAccessError(f"an affine map the rewrite does not read: {map_body}")
    varying = [name for name, operand in zip(names, operands) if operand in ivs]
    if not varying:
        return True
    if any(word in expr for word in _NONLINEAR):
        # Conservative: any floordiv, mod or ceildiv in an index that also
        # depends on a loop.
        return False
    symbols = {name: sympy.Symbol(name) for name in names}
    try:
        value = sympy.expand(sympy.sympify(expr, locals=symbols))
    except (sympy.SympifyError, SyntaxError, TypeError) as e:
        raise StridedAccessError(f"an affine expression the rewrite does not read: {expr}") from e
    for name in varying:
        coefficient = sympy.diff(value, symbols[name])
        if coefficient.free_symbols or coefficient not in (0, 1):
            return False
    return True


def strided_accesses_scalar(module_text: str) -> str:
    """``module_text`` with its strided affine accesses as memref accesses
    (Note [Strided accesses are not vectorised]); unchanged when it has none."""
    lines = module_text.splitlines()
    maps = {m.group(1): m.group(2) for m in map(_MAP_ALIAS.match, lines) if m}
    # Induction variables, and affine.apply results that vary with them and
    # step by one (an index through those is as good as a loop's own).
    ivs = {m.group(1) for line in lines for m in _FOR.finditer(line)}
    strided: set[str] = set()
    for line in lines:
        apply = _APPLY.match(line)
        if apply is None:
            continue
        name, map_ref, dims, syms = apply.groups()
        body = maps.get(map_ref) if map_ref.startswith("#") else map_ref[len("affine_map<"):-1]
        if body is None:
            raise StridedAccessError(f"affine.apply of an unknown map: {line.strip()}")
        operands = [o.strip() for o in dims.split(",") if o.strip()]
        operands += [o.strip() for o in (syms or "").split(",") if o.strip()]
        if any(o in strided for o in operands) or not _steps_by_one(body, operands, ivs):
            strided.add(name)
        elif any(o in ivs for o in operands):
            ivs.add(name)

    def indices_strided(indices: str, line: str) -> bool:
        parts = [p.strip() for p in indices.split(",") if p.strip()]
        if any("*" in p or any(word in p for word in _NONLINEAR) for p in parts if not _VALUE.match(p)):
            raise StridedAccessError(f"an access with a scaled index expression: {line.strip()}")
        return any(p in strided for p in parts)

    out = []
    changed = False
    for line in lines:
        load = _LOAD.match(line)
        if load and indices_strided(load.group(3), line):
            changed = True
            out.append(f"{load.group(1)}memref.load {load.group(2)}[{load.group(3)}] : {load.group(4)}")
            continue
        store = _STORE.match(line)
        if store and indices_strided(store.group(4), line):
            changed = True
            out.append(f"{store.group(1)}memref.store {store.group(2)}, {store.group(3)}[{store.group(4)}] : "
                       f"{store.group(5)}")
            continue
        out.append(line)
    return "\n".join(out) + "\n" if changed else module_text


def rewrite(module: Any) -> Any:
    """The module with its strided accesses scalar, parsed again in the
    same context (the module itself when it has none)."""
    from torch_mlir import ir

    text = str(module)
    rewritten = strided_accesses_scalar(text)
    if rewritten is text:
        return module
    return ir.Module.parse(rewritten, context=module.context)
