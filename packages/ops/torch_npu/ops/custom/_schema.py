"""Custom ops defined by their schema string.

An op's arguments (names, types, defaults) are written once, as its schema
in the form of ``native_functions.yaml`` and of Ascend's op-plugin, e.g.
``"npu_swiglu(Tensor x, SymInt dim=-1) -> Tensor"``. Everything else is
derived from it:

* the operator ``torch.ops.npu.<name>``, a ``torch.library.custom_op`` with
  that schema (so it has the same dispatcher registrations, autograd and
  fake-tensor behaviour as one whose schema custom_op infers);
* the arguments its kernel, fake implementation and autograd
  ``setup_context`` receive: one named tuple of the schema's arguments in
  schema order, defaults filled in (the dispatcher leaves out trailing
  arguments equal to their defaults, and a fake implementation sees a call's
  arguments as the caller spelled them);
* the public Python function ``torch_npu.<name>``, generated with the
  schema's parameter names and defaults.

So a new op is one schema string and the functions that compute it, and its
Python signature cannot drift from its schema::

    _SWIGLU = SchemaOp("npu_swiglu(Tensor x, SymInt dim=-1) -> Tensor")

    @_SWIGLU.register_kernel
    def _(args):
        a, b = args.x.chunk(2, dim=args.dim)
        ...

    npu_swiglu = _SWIGLU.python_function(__name__, "SwiGLU ...")
"""

from __future__ import annotations

import collections
import keyword
import linecache
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor

from ._common import NAMESPACE

#: The Python types of the schema types with no element types, for the
#: annotations of the generated functions (keyed by ``JitType.kind()``).
_PYTHON_TYPES: Dict[str, Any] = {
    "TensorType": Tensor,
    "IntType": int,
    "SymIntType": int,
    "FloatType": float,
    "BoolType": bool,
    "StringType": str,
    "NumberType": Union[int, float, bool],
    "ScalarTypeType": torch.dtype,
    "DeviceObjType": torch.device,
    "LayoutType": torch.layout,
    "MemoryFormatType": torch.memory_format,
}

#: What kernels, fake implementations and ``setup_context`` functions
#: receive: an op's :attr:`SchemaOp.Args`, a named tuple with one attribute
#: per schema argument (a type per op, made at run time, hence ``Any``).
Args = Any

#: The name of the operator in the generated public functions' code.
_OP_VARIABLE = "_npu_custom_op"


def _python_type(jit_type: Any) -> Any:
    """The Python type of the schema type ``jit_type`` (``Any`` if unknown)."""
    kind = jit_type.kind()
    if kind == "OptionalType":
        return Optional[_python_type(jit_type.getElementType())]
    if kind == "ListType":
        return List[_python_type(jit_type.getElementType())]
    if kind == "TupleType":
        return Tuple[tuple(_python_type(t) for t in jit_type.elements())]
    return _PYTHON_TYPES.get(kind, Any)


def _return_type(schema: torch._C.FunctionSchema) -> Any:
    types = [_python_type(r.real_type) for r in schema.returns]
    if not types:
        return None
    return types[0] if len(types) == 1 else Tuple[tuple(types)]


class SchemaOp:
    """The custom op defined by the schema string ``schema``.

    ``schema`` is a full schema, name included: ``"<name>(<arguments>) ->
    <returns>"`` defines ``torch.ops.npu.<name>``, ``"<ns>::<name>(...)"``
    an op of namespace ``<ns>``. The op exists from construction on; its
    kernel, fake implementation and autograd formula are registered with the
    ``register_*`` methods, which take functions of the call's :attr:`Args`.

    Attributes:
        namespace: the op's namespace (``"npu"`` unless ``schema`` names one).
        name: the op's name, ``<name>`` of ``torch.ops.<namespace>.<name>``.
        schema: the registered ``torch._C.FunctionSchema``.
        Args: the named tuple of the op's arguments, in schema order, with
            the schema's defaults; ``Args(*args, **kwargs)`` binds a call.
    """

    def __init__(self, schema: str) -> None:
        name, paren, rest = schema.partition("(")
        namespace, _, name = name.strip().rpartition("::")
        self.namespace = namespace or NAMESPACE
        self.name = name
        if not paren or not name.isidentifier():
            raise ValueError(
                f"expected a schema string 'name(arguments) -> returns', got {schema!r}"
            )

        # Checked before registering, so that a rejected schema leaves no op.
        arguments = torch._C.parse_schema(self.qualname + paren + rest).arguments
        for arg in arguments:
            if keyword.iskeyword(arg.name) or arg.name == _OP_VARIABLE:
                raise ValueError(f"{self.qualname}: argument name {arg.name!r} is not allowed")
        defaults = [a.default_value for a in arguments if a.has_default_value()]
        if any(a.has_default_value() for a in arguments[: len(arguments) - len(defaults)]):
            # Args, a named tuple, has only trailing defaults.
            raise NotImplementedError(
                f"{self.qualname}: a required argument after one with a default value"
            )
        self.Args = collections.namedtuple(  # type: ignore[misc]
            f"{name}_args", [a.name for a in arguments], defaults=defaults
        )

        # The kernel is looked up at call time so that it may be registered
        # after the op is defined.
        self._kernel: Optional[Callable[[Args], Any]] = None
        self._op = torch.library.custom_op(
            self.qualname, self._run_kernel, mutates_args=(), schema=paren + rest
        )
        self.schema: torch._C.FunctionSchema = self.overload._schema

    @property
    def qualname(self) -> str:
        """``"<namespace>::<name>"``."""
        return f"{self.namespace}::{self.name}"

    @property
    def packet(self) -> torch._ops.OpOverloadPacket:
        """``torch.ops.<namespace>.<name>``."""
        return getattr(getattr(torch.ops, self.namespace), self.name)

    @property
    def overload(self) -> torch._ops.OpOverload:
        """``torch.ops.<namespace>.<name>.default``."""
        return self.packet.default

    def argument_names(self, *, tensors: bool) -> Tuple[str, ...]:
        """The names of the op's arguments that are Tensors or optional
        Tensors (``tensors=True``), or of those that are not."""
        optional_tensor = torch._C.OptionalType(torch._C.TensorType.get())
        return tuple(
            a.name for a in self.schema.arguments if a.type.isSubtypeOf(optional_tensor) == tensors
        )

    def _run_kernel(self, *args: Any, **kwargs: Any) -> Any:
        if self._kernel is None:
            raise NotImplementedError(f"{self.qualname} has no kernel")
        return self._kernel(self.Args(*args, **kwargs))

    def register_kernel(self, fn: Callable[[Args], Any]) -> Callable[[Args], Any]:
        """Decorator: ``fn(args)`` computes the op (on every device)."""
        self._kernel = fn
        return fn

    def register_fake(self, fn: Callable[[Args], Any]) -> Callable[[Args], Any]:
        """Decorator: ``fn(args)`` is the op's fake (meta) implementation."""
        self._op.register_fake(lambda *args, **kwargs: fn(self.Args(*args, **kwargs)))
        return fn

    def register_autograd(
        self,
        backward: Callable[..., Any],
        *,
        setup_context: Optional[Callable[[Any, Args, Any], None]] = None,
    ) -> None:
        """Registers the op's autograd formula: ``setup_context(ctx, args,
        output)`` runs in the forward with the call's :attr:`Args`;
        ``backward(ctx, *grads)`` returns one gradient (or None) per
        positional argument, in schema order (as for
        ``torch.library.custom_op``, keyword-only arguments get none)."""
        if setup_context is None:
            self._op.register_autograd(backward)
            return
        user_setup = setup_context
        if any(a.kwarg_only for a in self.schema.arguments):
            # custom_op passes the keyword-only arguments separately.
            def setup(
                ctx: Any, inputs: Tuple[Any, ...], keyword_only_inputs: Dict[str, Any], output: Any
            ) -> None:
                user_setup(ctx, self.Args(*inputs, **keyword_only_inputs), output)
        else:
            def setup(ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:  # type: ignore[misc]
                user_setup(ctx, self.Args(*inputs), output)

        self._op.register_autograd(backward, setup_context=setup)

    def python_function(self, module: str, doc: str) -> Callable[..., Any]:
        """The public function that calls the op: named ``<name>``, of module
        ``module`` (assign it to that module's global ``<name>``, so that it
        pickles by reference), with docstring ``doc`` and the schema's
        parameters, defaults and (Python) types.

        It is generated code, not ``*args`` with a ``__signature__``, so that
        a call costs one Python frame and wrong arguments raise Python's own
        TypeError naming the function.
        """
        positional = [a.name for a in self.schema.arguments if not a.kwarg_only]
        kwarg_only = [a.name for a in self.schema.arguments if a.kwarg_only]
        params = positional + (["*"] + kwarg_only if kwarg_only else [])
        call = positional + [f"{n}={n}" for n in kwarg_only]
        # The op is a variable of the enclosing factory, not a global: the
        # generated code has no module of its own for torch.compile to
        # resolve globals in.
        source = (
            f"def make({_OP_VARIABLE}):\n"
            f"    def {self.name}({', '.join(params)}):\n"
            f"        return {_OP_VARIABLE}({', '.join(call)})\n"
            f"    return {self.name}\n"
        )
        # Shown in tracebacks through the generated code.
        filename = f"<generated python function of {self.qualname}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace: Dict[str, Any] = {}
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102
        fn = namespace["make"](self.packet)
        fn.__module__ = module
        fn.__qualname__ = self.name

        # Defaults and annotations are set as objects rather than written
        # into the source: no repr round trip.
        arguments = [a for a in self.schema.arguments if a.has_default_value()]
        fn.__defaults__ = tuple(a.default_value for a in arguments if not a.kwarg_only) or None
        fn.__kwdefaults__ = {a.name: a.default_value for a in arguments if a.kwarg_only} or None
        fn.__annotations__ = {a.name: _python_type(a.real_type) for a in self.schema.arguments}
        fn.__annotations__["return"] = _return_type(self.schema)
        fn.__doc__ = doc
        return fn

