"""NPU graphs: capture npu work once, replay it with one call.

The API of Ascend's ``torch_npu`` (and of ``torch.cuda``'s graphs), installed
on ``torch.npu`` by the plugin::

    g = torch.npu.NPUGraph()
    static_x = torch.zeros(8, device="npu")
    with torch.npu.graph(g):            # captures on a side stream
        static_y = static_x * 2 + 1
    static_x.copy_(torch.arange(8.0))
    g.replay()                          # runs the captured work again
    static_y                            # tensor([1., 3., ...], device='npu:0')

What a replay does and does not repeat (Note [Stream capture] in core's
NPUGraphsUtils.h):

- the captured device work, on the same memory: the inputs must be copied
  into the tensors used at capture ("static" inputs) and the outputs are
  overwritten in place at each replay;
- random ops draw new numbers at each replay, exactly those the same ops
  would draw eagerly from the generator's state at the replay;
- nothing the host did: Python, allocation and dispatch happen only at
  capture, which is what makes a replay cheap.

During a capture, synchronising with the device (``torch.npu.synchronize()``,
``.item()``, ``.cpu()``, ops whose output size depends on data) raises and
invalidates the capture. Another stream may take part by waiting for the
capturing stream (``side.wait_stream(torch.npu.current_stream())``) and must
join back (``torch.npu.current_stream().wait_stream(side)``) before the
capture ends.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from typing import Any, Literal, Optional, TypeVar, Union

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

import torch_npu

from ._C import _NPUGraph

__all__ = [
    "NPUGraph",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
]

CaptureErrorMode = Literal["default", "global", "thread_local", "relaxed"]

# torch.cuda.graph's capture_error_mode names -> CANN's aclmdlRICaptureMode.
_CAPTURE_MODES = {"default": 0, "global": 0, "thread_local": 1, "relaxed": 2}


def _capture_mode(capture_error_mode: str) -> int:
    try:
        return _CAPTURE_MODES[capture_error_mode]
    except KeyError:
        raise ValueError(
            f"capture_error_mode must be one of {sorted(_CAPTURE_MODES)}, got {capture_error_mode!r}"
        ) from None


def is_current_stream_capturing() -> bool:
    """Whether the current npu stream is capturing into a graph."""
    stream = torch.npu.current_stream()
    return torch_npu._C._npu_capture_status(stream.stream_id, stream.device_index) != 0


def graph_pool_handle() -> tuple[int, int]:
    """An id for a private memory pool that graphs can share: pass it as
    ``pool=`` to several captures (``torch.npu.graph(g, pool=handle)``)."""
    return torch_npu._C._npu_graph_pool_handle()


class NPUGraph(_NPUGraph):
    """A graph of npu work, captured from a stream and replayed with :meth:`replay`.

    Args:
        keep_graph: accepted for ``torch.cuda.CUDAGraph`` compatibility; a
            captured CANN model needs no separate instantiation, so it has no
            effect (the model is kept until :meth:`reset`).

    Use :class:`torch.npu.graph` to capture; it captures on a side stream and
    handles the stream context. The graph owns the memory its capture
    allocated (a private pool) until :meth:`reset` or deletion.
    """

    def __init__(self, keep_graph: bool = False) -> None:
        super().__init__(keep_graph)

    def capture_begin(self, pool: Optional[tuple[int, int]] = None,
                      capture_error_mode: CaptureErrorMode = "global") -> None:
        """Start capturing the work launched on the current stream (not the
        default stream).

        Args:
            pool: share the private memory pool of another graph
                (``other.pool()``) or of :func:`graph_pool_handle`.
            capture_error_mode: what the capture forbids elsewhere while it
                lasts: ``"global"`` (synchronous copies and synchronisation in
                any thread), ``"thread_local"`` or ``"relaxed"``.
        """
        super().capture_begin(pool=pool, mode=_capture_mode(capture_error_mode))

    def capture_end(self) -> None:
        """End the capture begun on the current stream. Raises if the capture
        was invalidated (the error names the call that did it)."""
        super().capture_end()

    def replay(self) -> None:
        """Enqueue the captured work on the current stream."""
        super().replay()

    def reset(self) -> None:
        """Release the captured model and its memory pool (after the replays
        queued have run); the instance can capture again."""
        super().reset()

    def pool(self) -> tuple[int, int]:
        """The id of the graph's private memory pool, to share with another capture."""
        return super().pool()

    def debug_dump(self, debug_path: str) -> None:
        """Write a description of the captured model (its streams and items)
        to ``debug_path`` as JSON (CANN's ``aclmdlRIDebugJsonPrint``)."""
        super().debug_dump(debug_path)

    def enable_debug_mode(self) -> None:
        """Accepted for ``torch.cuda.CUDAGraph`` compatibility: a captured model
        can always be dumped, so there is nothing to enable."""
        super().enable_debug_mode()

    def register_generator_state(self, generator: torch.Generator) -> None:
        """Make random ops that use ``generator`` (an npu generator other than
        the device's default, which every capture registers) draw new numbers
        at each replay. Call before :meth:`capture_begin`."""
        super().register_generator_state(generator)


class graph:
    """Context manager that captures the npu work of its body into ``npu_graph``.

    Args:
        npu_graph: the :class:`NPUGraph` to capture into.
        pool: a private pool to share (another graph's ``pool()`` or
            :func:`graph_pool_handle`).
        stream: the stream to capture on; by default one side stream shared by
            every ``torch.npu.graph``.
        capture_error_mode: as :meth:`NPUGraph.capture_begin`.

    Before capturing, the device is synchronised and unused cached memory is
    released, so that the capture's pool can take it. If the body raises, the
    capture is ended and discarded (the graph holds nothing to replay) and
    the body's error propagates.
    """

    default_capture_stream: Optional[torch.Stream] = None

    def __init__(self, npu_graph: NPUGraph, pool: Optional[tuple[int, int]] = None,
                 stream: Optional[torch.Stream] = None,
                 capture_error_mode: CaptureErrorMode = "global") -> None:
        if stream is None:
            if graph.default_capture_stream is None:
                graph.default_capture_stream = torch.npu.Stream()
            stream = graph.default_capture_stream
        self.npu_graph = npu_graph
        self.pool = pool
        self.capture_stream = stream
        self.capture_error_mode = capture_error_mode
        _capture_mode(capture_error_mode)  # a bad name fails here, not mid-way
        self._stream_context = torch.npu.stream(stream)

    def __enter__(self) -> None:
        torch.npu.synchronize()
        gc.collect()
        torch.npu.empty_cache()
        self._stream_context.__enter__()
        try:
            self.npu_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self._stream_context.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None:
                self.npu_graph.capture_end()
            else:
                # The body failed: end the capture so that the stream is usable
                # again, drop what was captured (a replay of part of the body
                # would be silently wrong), and let the body's error propagate.
                try:
                    self.npu_graph.capture_end()
                except RuntimeError:
                    pass
                self.npu_graph.reset()
        finally:
            self._stream_context.__exit__(exc_type, exc, tb)


_Callable = TypeVar("_Callable", bound=Callable[..., Any])


class _GraphedCallable:
    """The graphs and static tensors of one callable of make_graphed_callables."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        flat_args, self.args_spec = tree_flatten(args)
        if not all(isinstance(a, torch.Tensor) for a in flat_args):
            raise TypeError("make_graphed_callables: the sample arguments must be tensors "
                            "(nested in tuples, lists or dicts)")
        self.num_user_inputs = len(flat_args)
        params = tuple(fn.parameters()) if isinstance(fn, torch.nn.Module) else ()
        self.static_inputs: tuple[torch.Tensor, ...] = tuple(flat_args) + params
        self.fwd_graph = NPUGraph()
        self.bwd_graph = NPUGraph()
        self.static_outputs: tuple[torch.Tensor, ...] = ()
        self.outputs_spec: Any = None
        self.static_grad_outputs: tuple[Optional[torch.Tensor], ...] = ()
        self.static_grad_inputs: tuple[Optional[torch.Tensor], ...] = ()

    def run(self) -> tuple[torch.Tensor, ...]:
        outputs = self.fn(*tree_unflatten(list(self.static_inputs[:self.num_user_inputs]), self.args_spec))
        flat, self.outputs_spec = tree_flatten(outputs)
        if not all(isinstance(o, torch.Tensor) for o in flat):
            raise TypeError("make_graphed_callables: the callables must return tensors "
                            "(nested in tuples, lists or dicts)")
        return tuple(flat)

    def grad_inputs(self) -> tuple[torch.Tensor, ...]:
        return tuple(t for t in self.static_inputs if t.requires_grad)

    def backward(self, outputs: Sequence[torch.Tensor], grad_outputs: Sequence[Optional[torch.Tensor]],
                 allow_unused: bool) -> tuple[Optional[torch.Tensor], ...]:
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
        inputs = self.grad_inputs()
        if not pairs or not inputs:
            return ()
        return torch.autograd.grad(
            outputs=tuple(o for o, _ in pairs), inputs=inputs,
            grad_outputs=tuple(g for _, g in pairs), allow_unused=allow_unused)

    def capture_forward(self, pool: tuple[int, int]) -> None:
        with graph(self.fwd_graph, pool=pool):
            self.static_outputs = self.run()

    def capture_backward(self, pool: tuple[int, int], allow_unused: bool) -> None:
        self.static_grad_outputs = tuple(
            torch.empty_like(o) if o.requires_grad else None for o in self.static_outputs)
        with graph(self.bwd_graph, pool=pool):
            grads = self.backward(self.static_outputs, self.static_grad_outputs, allow_unused)
        # One gradient (or None) per static input, in their order.
        it = iter(grads)
        self.static_grad_inputs = tuple(next(it) if t.requires_grad else None for t in self.static_inputs)

    def autograd_function(self) -> Callable[..., Any]:
        owner = self

        class Graphed(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
                for static, value in zip(owner.static_inputs[:owner.num_user_inputs], inputs):
                    if static.data_ptr() != value.data_ptr():
                        static.copy_(value)
                owner.fwd_graph.replay()
                return tuple(o.detach() for o in owner.static_outputs)

            @staticmethod
            @torch.autograd.function.once_differentiable
            def backward(ctx: Any, *grads: torch.Tensor) -> tuple[Optional[torch.Tensor], ...]:
                for static, grad in zip(owner.static_grad_outputs, grads):
                    if static is not None and grad is not None and static.data_ptr() != grad.data_ptr():
                        static.copy_(grad)
                owner.bwd_graph.replay()
                return tuple(g.detach() if g is not None else None for g in owner.static_grad_inputs)

        def graphed(*args: Any) -> Any:
            flat, _ = tree_flatten(args)
            outputs = Graphed.apply(*(tuple(flat) + owner.static_inputs[owner.num_user_inputs:]))
            return tree_unflatten(list(outputs), owner.outputs_spec)

        return graphed


def make_graphed_callables(
    callables: Union[_Callable, tuple[_Callable, ...]],
    sample_args: Union[tuple[Any, ...], tuple[tuple[Any, ...], ...]],
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool: Optional[tuple[int, int]] = None,
) -> Union[_Callable, tuple[_Callable, ...]]:
    """Graphed versions of callables (functions or ``nn.Module``): their
    forward and backward passes are each captured into an :class:`NPUGraph`
    and replayed, as ``torch.cuda.make_graphed_callables`` does.

    Args:
        callables: a callable, or a tuple of them (captured in that order and
            then expected to run in that order).
        sample_args: the arguments of each callable (a tuple; a tuple of
            tuples for several callables): tensors with the shapes, dtypes,
            devices and ``requires_grad`` of every later call.
        num_warmup_iters: eager iterations run before capture.
        allow_unused_input: allow inputs that the outputs do not depend on.
        pool: a private pool to capture into (default: a new one shared by
            all the graphs made here).

    A graphed module replays its graphs while ``module.training`` is True and
    runs its own forward otherwise. The outputs of a replay are overwritten
    by the next replay; clone them to keep them.
    """
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables = (callables,)
        sample_args = (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError(f"make_graphed_callables: {len(callables)} callables but "
                         f"{len(sample_args)} sets of sample arguments")
    if torch.is_autocast_enabled("npu") and torch.is_autocast_cache_enabled():
        raise RuntimeError("make_graphed_callables does not support autocast's cast cache: "
                           "use torch.autocast('npu', cache_enabled=False)")
    for fn in callables:
        if isinstance(fn, torch.nn.Module):
            if fn._backward_hooks or fn._forward_hooks or fn._forward_pre_hooks:
                raise RuntimeError("make_graphed_callables: modules must have no hooks registered "
                                   "(a replay would not run them)")
            if any(b.requires_grad for b in fn.buffers()):
                raise RuntimeError("make_graphed_callables: module buffers must not require grad")
    for args in sample_args:
        if not isinstance(args, tuple):
            raise TypeError("make_graphed_callables: sample_args must be a tuple of arguments per callable")

    parts = [_GraphedCallable(fn, args) for fn, args in zip(callables, sample_args)]
    for part in parts:
        for t in part.static_inputs:
            if t.device.type != "npu":
                raise ValueError(f"make_graphed_callables: expected npu tensors, got one on {t.device}")

    # Warm up on a side stream: lazy initialisation (cuBLAS-like handles,
    # autograd's first calls, optimizer state) must not land in a capture.
    torch.npu.synchronize()
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        for part in parts:
            for _ in range(num_warmup_iters):
                outputs = part.run()
                grads = part.backward(
                    outputs, [torch.empty_like(o) if o.requires_grad else None for o in outputs],
                    allow_unused_input)
                del outputs, grads
    torch.npu.current_stream().wait_stream(side)
    torch.npu.synchronize()

    mempool = graph_pool_handle() if pool is None else pool
    for part in parts:
        part.capture_forward(mempool)
    for part in reversed(parts):
        part.capture_backward(mempool, allow_unused_input)

    results = []
    for fn, part in zip(callables, parts):
        graphed = part.autograd_function()
        if isinstance(fn, torch.nn.Module):
            original_forward = fn.forward

            def forward(*args: Any, _graphed: Any = graphed, _module: torch.nn.Module = fn,
                        _original: Any = original_forward) -> Any:
                return _graphed(*args) if _module.training else _original(*args)

            fn.forward = forward
            results.append(fn)
        else:
            results.append(graphed)
    return results[0] if just_one else tuple(results)
