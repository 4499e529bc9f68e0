"""``torch.compile(mode="reduce-overhead")`` on npu: Inductor's compiled graphs
replayed from NPUGraphs.

Inductor wraps a compiled graph in CUDA graphs when ``reduce-overhead`` asks
for them, through ``torch._inductor.config.cudagraph_policy``, and refuses
them at lowering for any device but CUDA ("multiple devices: npu"), silently
for npu. Two changes make the mode work for npu, and leave CUDA's path as
it is:

- the lowering check accepts a graph whose only device is npu;
- an :class:`NPUGraphPolicy` (installed when no other policy is set) wraps
  npu graphs in :class:`GraphedCompiledFn` and hands any other to Inductor's
  own CUDA graph trees.

This module is part of the npu backend's sources that key Inductor's FX
graph cache (``_passes._backend_source_hash``), so a cached graph carries
the decision made by this version of the check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch

__all__ = ["GraphedCompiledFn", "install"]


def _is_npu_tensor(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "npu"


class _Capture(NamedTuple):
    graph: Any
    inputs: list[Any]  # what the graph reads: private buffers, or a caller's static input in place
    outputs: Any
    in_place: dict[int, int]  # index -> address of the static inputs used in place


class GraphedCompiledFn:
    """A compiled graph (Inductor's boxed callable) replayed from an NPUGraph
    per input signature (shapes, strides, dtypes, devices).

    The first call with a signature runs the graph eagerly and captures it;
    later calls copy the inputs into the capture's buffers, replay, copy
    inputs the graph mutates back, and return copies of the outputs, so that
    a later replay never overwrites what an earlier call returned.

    Note [Static inputs that move]: Inductor's static inputs (parameters and
    buffers; for a backward graph also every tensor the forward saved, which
    CUDA graph trees keep at fixed addresses in the forward's pool) are read
    in place, at the address they had at capture. Here the forward returns
    copies, so a saved tensor has a new address at every step: an input
    found at another address joins the inputs copied into buffers, and the
    graph is captured once more. Keying captures by address instead, as
    this class did, captured the backward afresh at every training step,
    about 200 ms each, and kept every capture.
    """

    _boxed_call = True

    def __init__(self, model: Callable[[list[Any]], Any], static_input_idxs: Sequence[int],
                 mutated_input_idxs: Sequence[int]) -> None:
        self.model = model
        self.static_input_idxs = frozenset(static_input_idxs)
        self.mutated_input_idxs = tuple(mutated_input_idxs)
        self.moved_input_idxs: set[int] = set()  # Note [Static inputs that move]
        self.captures: dict[tuple[Any, ...], _Capture] = {}

    def _signature(self, inputs: Sequence[Any]) -> tuple[Any, ...]:
        return tuple((tuple(a.shape), a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor) else a
                     for a in inputs)

    def _in_place(self, i: int) -> bool:
        return i in self.static_input_idxs and i not in self.moved_input_idxs

    def _capture(self, inputs: Sequence[Any]) -> _Capture:
        from ..graphs import NPUGraph, graph

        static_inputs: list[Any] = []
        in_place: dict[int, int] = {}
        for i, a in enumerate(inputs):
            if isinstance(a, torch.Tensor) and not self._in_place(i):
                buffer = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
                buffer.copy_(a)
                static_inputs.append(buffer)
            else:
                if isinstance(a, torch.Tensor):
                    in_place[i] = a.data_ptr()
                static_inputs.append(a)
        npu_graph = NPUGraph()
        with graph(npu_graph):
            outputs = self.model(list(static_inputs))
        return _Capture(npu_graph, static_inputs, outputs, in_place)

    def __call__(self, inputs: list[Any]) -> Any:
        key = self._signature(inputs)
        captured = self.captures.get(key)
        if captured is not None:
            moved = {i for i, address in captured.in_place.items() if inputs[i].data_ptr() != address}
            if moved:
                self.moved_input_idxs |= moved
                del self.captures[key]
                captured = None
        if captured is None:
            outputs = self.model(list(inputs))  # eager: warms up, returns real results
            self.captures[key] = self._capture(inputs)
            inputs.clear()
            return outputs
        for i, (static, a) in enumerate(zip(captured.inputs, inputs)):
            if isinstance(a, torch.Tensor) and i not in captured.in_place:
                static.copy_(a)
        captured.graph.replay()
        for i in self.mutated_input_idxs:
            if i not in captured.in_place and isinstance(inputs[i], torch.Tensor):
                inputs[i].copy_(captured.inputs[i])
        inputs.clear()
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in captured.outputs]


def install() -> None:
    """Makes ``mode="reduce-overhead"`` use NPUGraphs for npu graphs (idempotent;
    a no-op on a torch without Inductor's graph policy)."""
    import torch._inductor.config as inductor_config
    from torch._inductor import cudagraph_utils

    if not hasattr(cudagraph_utils, "CUDAGraphPolicy") or not hasattr(
            cudagraph_utils, "check_lowering_disable_cudagraph"):
        return
    original_check = cudagraph_utils.check_lowering_disable_cudagraph
    if not getattr(original_check, "_accepts_npu", False):
        def check_lowering_disable_cudagraph(device_node_mapping: dict[torch.device, Any]) -> str | None:
            devices = {d for d in device_node_mapping if d.type != "meta"}
            if len(devices) == 1 and next(iter(devices)).type == "npu":
                return None
            return original_check(device_node_mapping)

        check_lowering_disable_cudagraph._accepts_npu = True  # type: ignore[attr-defined]
        cudagraph_utils.check_lowering_disable_cudagraph = check_lowering_disable_cudagraph

    class NPUGraphPolicy(cudagraph_utils.CUDAGraphPolicy):
        """Inductor's graph policy: NPUGraphs for npu graphs, CUDA graph trees
        for the others."""

        def cudagraphify(self, model: Callable[..., Any], example_inputs: Sequence[Any],
                         static_input_idxs: Sequence[int], **kwargs: Any) -> Callable[..., Any]:
            if any(_is_npu_tensor(t) for t in example_inputs):
                return GraphedCompiledFn(model, static_input_idxs, kwargs.get("mutated_input_idxs", ()))
            return super().cudagraphify(model, example_inputs, static_input_idxs, **kwargs)

    if inductor_config.cudagraph_policy is None:
        inductor_config.cudagraph_policy = NPUGraphPolicy()
