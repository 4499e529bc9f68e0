"""Same-width ``view.dtype`` of a kernel's program as a tensor bitcast.

Note [Bitcasts torch-mlir does not lower]
torch-mlir decomposes copysign and signbit into ``view.dtype`` (the float's
bits as an integer, whose sign is the float's sign bit, NaN's included),
and has no lowering of ``view.dtype`` to linalg: every kernel with one ran
its aten ops eagerly (its message named a ``torch.constant.int`` it could
not legalize, the dtype argument left over). A view between dtypes of one
width is a bitcast per element. So the program is imported to
torch-mlir's backend IR, each such ``view.dtype`` is replaced by
``tensor.bitcast`` between ``torch_c`` conversions (the one bitcast its
linalg backend accepts), the module is lowered to linalg from there, and
each ``tensor.bitcast`` (which one-shot bufferization leaves
unbufferized) becomes a ``linalg.generic`` of ``arith.bitcast``
(:func:`bitcasts_as_loops`), which fuses with its neighbours.
The ``torch_c`` dialect is only loaded into a context by the passes that
use it, and the Python bindings cannot register it: the rewritten module
is parsed after a trivial module was lowered in the same context.
Views between dtypes of different widths (which change the shape) are
left as they are, and still fail.
"""

from __future__ import annotations

import re
from typing import Any

_VIEW_DTYPE = re.compile(
    r"(%[\w.]+) = torch\.aten\.view\.dtype (%[\w.#]+), %[\w.]+ : "
    r"!torch\.vtensor<\[([\d,]*)\],(\w+)>, !torch\.int -> !torch\.vtensor<\[([\d,]*)\],(\w+)>")

# Bits per element of torch-mlir's element types.
_WIDTHS = {"f64": 64, "si64": 64, "f32": 32, "si32": 32, "f16": 16, "bf16": 16, "si16": 16, "si8": 8, "ui8": 8}
_SIGNLESS = {"si64": "i64", "si32": "i32", "si16": "i16", "si8": "i8", "ui8": "i8"}

_WARM_UP = """func.func @warm_up(%arg0: !torch.vtensor<[1],f32>) -> !torch.vtensor<[1],f32> {
  return %arg0 : !torch.vtensor<[1],f32>
}"""


def _builtin(shape: str, element: str) -> str:
    element = _SIGNLESS.get(element, element)
    dims = "x".join(shape.split(",")) if shape else ""
    return f"tensor<{dims}x{element}>" if dims else f"tensor<{element}>"


def _is_bitcast(view: re.Match) -> bool:
    """Whether a matched ``view.dtype`` keeps the shape and the element
    width: a bitcast per element."""
    _, _, shape, element, new_shape, new_element = view.groups()
    return shape == new_shape and _WIDTHS.get(element) == _WIDTHS.get(new_element) is not None


def has_bitcasts(text: str) -> bool:
    """Whether a module's text has a same-width ``view.dtype`` to rewrite."""
    return any(_is_bitcast(m) for m in _VIEW_DTYPE.finditer(text))


def rewrite(module: Any) -> Any:
    """``module`` (torch-mlir's backend IR) with its same-width
    ``view.dtype`` ops as tensor bitcasts (Note [Bitcasts torch-mlir does
    not lower]), in the same context."""
    from torch_mlir import ir
    from torch_mlir.compiler_utils import OutputType, lower_mlir_module

    count = 0

    def replace(m: re.Match) -> str:
        nonlocal count
        if not _is_bitcast(m):
            return m.group(0)
        result, source, shape, element, new_shape, new_element = m.groups()
        count += 1
        name = f"%npu_bitcast{count}"
        before, after = _builtin(shape, element), _builtin(new_shape, new_element)
        return (f"{name}_in = torch_c.to_builtin_tensor {source} : !torch.vtensor<[{shape}],{element}> -> {before}\n"
                f"    {name} = tensor.bitcast {name}_in : {before} to {after}\n"
                f"    {result} = torch_c.from_builtin_tensor {name} : {after} -> "
                f"!torch.vtensor<[{new_shape}],{new_element}>")

    text = _VIEW_DTYPE.sub(replace, str(module))
    context = module.context
    with context:
        # Loads torch_c into the context (see the Note).
        lower_mlir_module(False, OutputType.LINALG_ON_TENSORS, ir.Module.parse(_WARM_UP))
        return ir.Module.parse(text)


_TENSOR_BITCAST = re.compile(r"(%[\w.]+) = tensor\.bitcast (%[\w.#]+) : tensor<([^>]*)> to tensor<([^>]*)>")


def bitcasts_as_loops(module: Any) -> Any:
    """``module`` (linalg on tensors) with each ``tensor.bitcast`` a
    ``linalg.generic`` of ``arith.bitcast`` (Note [Bitcasts torch-mlir does
    not lower])."""
    from torch_mlir import ir

    text = str(module)
    if "tensor.bitcast" not in text:
        return module
    count = 0

    def replace(m: re.Match) -> str:
        nonlocal count
        count += 1
        result, source, source_type, result_type = m.groups()
        *dims, element = source_type.split("x")
        new_element = result_type.split("x")[-1]
        tensor = f"tensor<{'x'.join(dims + [element])}>"
        new_tensor = f"tensor<{'x'.join(dims + [new_element])}>"
        loops = ", ".join(f"d{i}" for i in range(len(dims)))
        identity = f"affine_map<({loops}) -> ({loops})>"
        parallel = ", ".join(['"parallel"'] * len(dims))
        init = f"%npu_bitcast_init{count}"
        return (f"{init} = tensor.empty() : {new_tensor}\n"
                f"    {result} = linalg.generic {{indexing_maps = [{identity}, {identity}], "
                f"iterator_types = [{parallel}]}} ins({source} : {tensor}) outs({init} : {new_tensor}) {{\n"
                f"    ^bb0(%in: {element}, %out: {new_element}):\n"
                f"      %bits = arith.bitcast %in : {element} to {new_element}\n"
                f"      linalg.yield %bits : {new_element}\n"
                f"    }} -> {new_tensor}")

    with module.context:
        return ir.Module.parse(_TENSOR_BITCAST.sub(replace, text))
