"""Bool buffers inside a kernel hold one byte per element.

Note [Bool buffers of a kernel in bytes]
Once ``affine-super-vectorize`` vectorises a loop, LLVM stores and loads a
``vector<16xi1>`` as 16 packed bits, while a scalar access of a
``memref<...xi1>`` (another loop, the remainder of a loop) addresses one
byte per element: a bool buffer written by one loop and read by another is
misread. Note [Bool values of a program in bytes] (_program.py) keeps a
program's computed bools as uint8 for that reason, but MLIR folds the
conversion away (``extui`` to i8, then ``cmpi ne 0``, is the i1 itself) and
CSE merges duplicates, so a bool value with two readers (a mask that is
summed and also selects: cross-entropy's ``ignore_index``, attention masks)
still became an i1 buffer, and compiled code summed the wrong bits
(``(x > 0).sum()`` next to ``torch.where(x > 0, x, 0)`` gave 5460 for 33).

So after the kernel's loops are affine loops and before they are
vectorised, every ``memref.alloc`` of i1 elements becomes an alloc of i8:
its stores extend the value (``arith.extui``), its loads truncate it back
(``arith.trunci``), and nothing else may use it; a kernel whose i1 buffer is
used otherwise (a view, a copy, a call) cannot be compiled and runs its aten
ops eagerly (MLIRCompileError), rather than risk the misread. The rewrite is
textual: the affine forms of these few ops are regular, and the module is
parsed again (a malformed result fails to parse, never miscompiles).
"""

from __future__ import annotations

import re
from typing import Any

_ALLOC = re.compile(r"^(\s*)(%[\w.$-]+) = memref\.alloc\(\)(.*) : memref<([^>]*)xi1>$")


class ByteBoolsError(RuntimeError):
    """An i1 buffer is used in a way the rewrite does not handle."""


def bool_buffers_as_bytes(module_text: str) -> str:
    """``module_text`` with its i1 allocs as i8 (Note [Bool buffers of a
    kernel in bytes]); unchanged when it has none."""
    lines = module_text.splitlines()
    buffers = {}
    for line in lines:
        match = _ALLOC.match(line)
        if match:
            buffers[match.group(2)] = match.group(4)
    if not buffers:
        if re.search(r"memref<[^>]*xi1>", module_text):
            raise ByteBoolsError("a bool buffer that is not a plain alloc")
        return module_text
    out: list[str] = []
    fresh = 0
    for line in lines:
        used = [name for name in buffers if re.search(re.escape(name) + r"\b", line)]
        if not used:
            out.append(line)
            continue
        if len(used) != 1:
            raise ByteBoolsError(f"one line uses several bool buffers: {line.strip()}")
        name = used[0]
        shape = buffers[name]
        i1_type, i8_type = f"memref<{shape}xi1>", f"memref<{shape}xi8>"
        indent = line[: len(line) - len(line.lstrip())]
        body = line.strip()
        if _ALLOC.match(line) or re.fullmatch(rf"memref\.dealloc {re.escape(name)} : {re.escape(i1_type)}", body):
            out.append(line.replace(i1_type, i8_type))
            continue
        store = re.fullmatch(rf"affine\.store (%[\w.$-]+), {re.escape(name)}(\[.*\]) : {re.escape(i1_type)}", body)
        if store:
            byte = f"%__byte_bool{fresh}"
            fresh += 1
            out.append(f"{indent}{byte} = arith.extui {store.group(1)} : i1 to i8")
            out.append(f"{indent}affine.store {byte}, {name}{store.group(2)} : {i8_type}")
            continue
        load = re.fullmatch(rf"(%[\w.$-]+) = affine\.load {re.escape(name)}(\[.*\]) : {re.escape(i1_type)}", body)
        if load:
            byte = f"%__byte_bool{fresh}"
            fresh += 1
            out.append(f"{indent}{byte} = affine.load {name}{load.group(2)} : {i8_type}")
            out.append(f"{indent}{load.group(1)} = arith.trunci {byte} : i8 to i1")
            continue
        raise ByteBoolsError(f"a bool buffer is used other than by affine loads and stores: {body}")
    rewritten = "\n".join(out) + "\n"
    if re.search(r"memref<[^>]*xi1>", rewritten):
        raise ByteBoolsError("a bool buffer that is not a plain alloc remains")
    return rewritten


def rewrite(module: Any) -> Any:
    """The module with its bool buffers in bytes, parsed again in the same
    context (the module itself when it has none)."""
    from torch_mlir import ir

    text = str(module)
    rewritten = bool_buffers_as_bytes(text)
    if rewritten is text:
        return module
    return ir.Module.parse(rewritten, context=module.context)
