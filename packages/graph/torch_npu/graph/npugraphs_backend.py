"""The ``npugraphs`` backend of torch.compile: each compiled graph (forward
and backward, through AOTAutograd) is captured into an :class:`NPUGraph` and
replayed::

    model = torch.compile(model, backend="npugraphs")

Registered with torch._dynamo through the ``torch_dynamo_backends`` entry
point, so importing torch_npu does not import torch._dynamo.

For each set of input shapes, dtypes and strides a compiled graph is called
with, the first call runs it eagerly (warming up lazy state and returning
real results), and a capture made right after serves the later calls:
inputs are copied into the graph's static input buffers, the graph is
replayed, and the outputs are returned as fresh tensors (copies of the
graph's static outputs). Copying costs a device copy per input and output,
and keeps the results right when a later replay overwrites the static
buffers (two forwards before a backward, outputs kept across steps).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .graphs import NPUGraph, graph

__all__ = ["npugraphs"]


def _signature(args: Sequence[Any]) -> tuple[Any, ...]:
    key = []
    for a in args:
        if isinstance(a, torch.Tensor):
            key.append((tuple(a.shape), a.stride(), a.dtype, a.device, a.requires_grad))
        else:
            key.append(a)
    return tuple(key)


class _CapturedCall:
    """One capture of a compiled graph, for one input signature."""

    def __init__(self, fn: Callable[[list[Any]], Any], args: Sequence[Any]) -> None:
        self.static_inputs = [
            torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
            if isinstance(a, torch.Tensor) else a
            for a in args
        ]
        self._copy_in(args)
        self.graph = NPUGraph()
        with graph(self.graph):
            outputs = fn(list(self.static_inputs))
        self.static_outputs = outputs

    def _copy_in(self, args: Sequence[Any]) -> None:
        for static, a in zip(self.static_inputs, args):
            if isinstance(a, torch.Tensor):
                static.copy_(a)

    def __call__(self, args: Sequence[Any]) -> Any:
        self._copy_in(args)
        self.graph.replay()
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in self.static_outputs]


def _npugraphify(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    from torch._functorch.aot_autograd import make_boxed_func

    run = make_boxed_func(gm.forward)
    captures: dict[tuple[Any, ...], _CapturedCall] = {}

    def compiled(args: list[Any]) -> Any:
        if not any(isinstance(a, torch.Tensor) and a.device.type == "npu" for a in args):
            return run(args)  # nothing on npu to capture
        key = _signature(args)
        captured = captures.get(key)
        if captured is not None:
            return captured(args)
        # First call with these inputs: run eagerly, then capture for the next.
        outputs = run(list(args))
        captures[key] = _CapturedCall(run, args)
        return outputs

    compiled._boxed_call = True  # type: ignore[attr-defined]
    return compiled


def npugraphs(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """torch.compile backend: AOTAutograd's forward and backward graphs, each
    replayed from an NPUGraph (see the module's docstring)."""
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=_npugraphify, bw_compiler=_npugraphify)(gm, example_inputs)
