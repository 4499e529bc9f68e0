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
(``arith.trunci``) (affine accesses, and ``memref`` ones where an index
is data: a gather), and nothing else may use it; a kernel whose i1 buffer is
used otherwise (a view, a copy, a call) cannot be compiled and runs its aten
ops eagerly (MLIRCompileError), rather than risk the misread. The rewrite is
textual: the affine forms of these few ops are regular, and the module is
parsed again (a malformed result fails to parse, never miscompiles).

Note [Reshaped views of a bool buffer]
Bufferization turns a reshape of a bool value into ``memref.expand_shape``
or ``memref.collapse_shape`` of its buffer, a view that loops then read:
cross-entropy's mask of kept labels (``labels != ignore_index``), written
per row and read as a column of the logits' shape, and cumprod's backward.
Such a view of a buffer that becomes i8 is the same bytes in another
shape, so it becomes the same view of i8 elements, and its loads and
stores are rewritten as the buffer's own (every kernel with one ran its
aten ops eagerly before: cross-entropy with ignored labels in every
training step). Views of views are followed; a reshape of an i1 memref
that is not such a buffer is still refused.
"""

from __future__ import annotations

import re
from typing import Any

_ALLOC = re.compile(r"^(\s*)(%[\w.$-]+) = memref\.alloc\(\)(.*) : memref<([^>]*)xi1>$")
# A reshape of a bool buffer (Note [Reshaped views of a bool buffer]).
_RESHAPE = re.compile(r"^\s*(%[\w.$-]+) = memref\.(?:expand_shape|collapse_shape) (%[\w.$-]+) .* : "
                      r"memref<([^>]*)xi1> into memref<([^>]*)xi1>$")


class ByteBoolsError(RuntimeError):
    """An i1 buffer is used in a way the rewrite does not handle."""


def bool_buffers_as_bytes(module_text: str) -> str:
    """``module_text`` with its i1 allocs as i8 (Note [Bool buffers of a
    kernel in bytes]); unchanged when it has none."""
    lines = module_text.splitlines()
    buffers = {}
    reshapes = {}
    for line in lines:
        match = _ALLOC.match(line)
        if match:
            buffers[match.group(2)] = match.group(4)
        reshape = _RESHAPE.match(line)
        if reshape and reshape.group(2) in buffers:
            # Note [Reshaped views of a bool buffer]
            buffers[reshape.group(1)] = reshape.group(4)
            reshapes[reshape.group(1)] = reshape.group(2)
    if not buffers:
        if re.search(r"memref<[^>]*xi1>", module_text):
            raise ByteBoolsError("a bool buffer that is not a plain alloc")
        return module_text
    out: list[str] = []
    fresh = 0
    for line in lines:
        reshape = _RESHAPE.match(line)
        if reshape and reshapes.get(reshape.group(1)) == reshape.group(2):
            # the same bytes seen in another shape: a view of the i8 buffer
            out.append(line.replace("xi1>", "xi8>"))
            continue
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
        # affine accesses, or memref ones where an index is data (a gather)
        store = re.fullmatch(rf"(affine|memref)\.store (%[\w.$-]+), {re.escape(name)}(\[.*\]) : {re.escape(i1_type)}",
                             body)
        if store:
            byte = f"%__byte_bool{fresh}"
            fresh += 1
            out.append(f"{indent}{byte} = arith.extui {store.group(2)} : i1 to i8")
            out.append(f"{indent}{store.group(1)}.store {byte}, {name}{store.group(3)} : {i8_type}")
            continue
        load = re.fullmatch(rf"(%[\w.$-]+) = (affine|memref)\.load {re.escape(name)}(\[.*\]) : {re.escape(i1_type)}",
                            body)
        if load:
            byte = f"%__byte_bool{fresh}"
            fresh += 1
            out.append(f"{indent}{byte} = {load.group(2)}.load {name}{load.group(3)} : {i8_type}")
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
