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


def _storage_uses(t: torch.Tensor) -> int:
    """How many holders the storage of ``t`` has (tensors, storage objects)."""
    return torch._C._storage_Use_Count(t.untyped_storage()._cdata)


def _sharing_storage(t: torch.Tensor) -> torch.Tensor:
    """A new tensor (not a view, with its own version counter) on the
    storage of ``t``, with the same geometry."""
    alias = torch.empty(0, dtype=t.dtype, device=t.device)
    with torch.no_grad():
        alias.set_(t.untyped_storage(), t.storage_offset(), t.shape, t.stride())
    return alias


# Note [Outputs of replays are lent, not copied]: a replay writes the
# capture's output buffers, so a later replay of the same capture must not
# run while anything still holds what an earlier one returned. CUDA graph
# trees lend the buffers and fail a read of an overwritten output; here a
# capture lends its outputs (tensors on the buffers' storage, no copy) and is
# replayed again only once their storages are back to the holders they had
# right after the capture. A training step's forward outputs are what the
# backward reads (the saved tensors), freed by the backward: the next step
# replays the same capture, so the backward finds its inputs where they were
# at its capture, and reads them in place (no copy either). While a
# capture's outputs are held (a loss kept across steps, outputs collected in
# a list), a second lending capture of the same graph is made; while both
# are held, a capture whose outputs are always returned as copies runs. At
# most _LENDING_CAPTURES + 1 captures per input signature and address
# variant, so memory stays bounded; results never change.
_LENDING_CAPTURES = 2

# A graph whose static inputs are found at other addresses than at each of
# this many captures copies the inputs that moved from then on (Note
# [Static inputs that move]).
_ADDRESS_VARIANTS = 2


class _Capture(NamedTuple):
    graph: Any
    inputs: list[Any]  # what the graph reads: private buffers; None for a caller's static input read in place
    outputs: Any
    in_place: dict[int, int]  # index -> address of the static inputs read in place
    in_place_storages: list[Any]  # StorageWeakRef of each: a capture of dead inputs can be dropped
    output_uses: tuple[int, ...] | None  # _storage_uses of each tensor output when unheld; None: returns copies

    def reads_in_place(self, inputs: Sequence[Any]) -> bool:
        return all(inputs[i].data_ptr() == address for i, address in self.in_place.items())

    def moved(self, inputs: Sequence[Any]) -> set[int]:
        return {i for i, address in self.in_place.items() if inputs[i].data_ptr() != address}

    def inputs_died(self) -> bool:
        return any(ref.expired() for ref in self.in_place_storages)

    def lends(self) -> bool:
        return self.output_uses is not None

    def outputs_free(self) -> bool:
        if self.output_uses is None:
            return True
        tensors = (o for o in self.outputs if isinstance(o, torch.Tensor))
        return all(_storage_uses(o) == uses for o, uses in zip(tensors, self.output_uses))


class GraphedCompiledFn:
    """A compiled graph (Inductor's boxed callable) replayed from NPUGraphs
    per input signature (shapes, strides, dtypes, devices).

    The first call with a signature runs the graph eagerly and captures it;
    later calls copy the inputs into the capture's buffers, replay, copy
    inputs the graph mutates back, and lend the outputs (Note [Outputs of
    replays are lent, not copied]).

    Note [Static inputs that move]: Inductor's static inputs (parameters and
    buffers; for a backward graph also every tensor the forward saved) are
    read in place, at the address they had at capture. A saved tensor is
    where the forward's capture lent it from, so it moves only when another
    capture of the forward ran (or the forward ran eagerly): a backward
    whose in-place inputs are at other addresses than at any of its
    captures is captured again for those addresses, up to _ADDRESS_VARIANTS
    captures; beyond that, the inputs that moved are copied into buffers
    from then on. A capture whose in-place inputs have all been freed is
    dropped first. Keying captures by address alone, as this class once
    did, captured the backward afresh at every training step, about 200 ms
    each, and kept every capture.
    """

    _boxed_call = True

    def __init__(self, model: Callable[[list[Any]], Any], static_input_idxs: Sequence[int],
                 mutated_input_idxs: Sequence[int]) -> None:
        self.model = model
        self.static_input_idxs = frozenset(static_input_idxs)
        self.mutated_input_idxs = tuple(mutated_input_idxs)
        self.moved_input_idxs: set[int] = set()  # Note [Static inputs that move]
        self.captures: dict[tuple[Any, ...], list[_Capture]] = {}

    def _signature(self, inputs: Sequence[Any]) -> tuple[Any, ...]:
        return tuple((tuple(a.shape), a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor) else a
                     for a in inputs)

    def _in_place(self, i: int) -> bool:
        return i in self.static_input_idxs and i not in self.moved_input_idxs

    def _capture(self, inputs: Sequence[Any], lends: bool) -> _Capture:
        from torch.multiprocessing.reductions import StorageWeakRef

        from ..graphs import NPUGraph, graph

        static_inputs: list[Any] = []
        graph_inputs: list[Any] = []
        in_place: dict[int, int] = {}
        storages: list[Any] = []
        for i, a in enumerate(inputs):
            if isinstance(a, torch.Tensor) and not self._in_place(i):
                buffer = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
                buffer.copy_(a)
                static_inputs.append(buffer)
                graph_inputs.append(buffer)
            elif isinstance(a, torch.Tensor):
                # Not kept: the capture is replayed only while an input is
                # at this address (a tensor held here would keep a dead
                # step's saved tensors).
                in_place[i] = a.data_ptr()
                storages.append(StorageWeakRef(a.untyped_storage()))
                static_inputs.append(None)
                graph_inputs.append(a)
            else:
                static_inputs.append(a)
                graph_inputs.append(a)
        npu_graph = NPUGraph()
        with graph(npu_graph):
            outputs = self.model(graph_inputs)
        del graph_inputs
        uses = tuple(_storage_uses(o) for o in outputs if isinstance(o, torch.Tensor)) if lends else None
        return _Capture(npu_graph, static_inputs, outputs, in_place, storages, uses)

    def _replay(self, captured: _Capture, inputs: list[Any]) -> list[Any]:
        for static, a in zip(captured.inputs, inputs):
            if isinstance(static, torch.Tensor):
                static.copy_(a)
        captured.graph.replay()
        for i in self.mutated_input_idxs:
            if isinstance(captured.inputs[i], torch.Tensor):
                inputs[i].copy_(captured.inputs[i])
        inputs.clear()
        if captured.lends():
            return [_sharing_storage(o) if isinstance(o, torch.Tensor) else o for o in captured.outputs]
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in captured.outputs]

    def __call__(self, inputs: list[Any]) -> Any:
        captures = self.captures.setdefault(self._signature(inputs), [])
        if not captures:
            outputs = self.model(list(inputs))  # eager: warms up, returns real results
            captures.append(self._capture(inputs, lends=True))
            inputs.clear()
            return outputs
        here = [c for c in captures if c.reads_in_place(inputs)]
        if not here:
            captures[:] = [c for c in captures if not c.inputs_died()]
            if len({tuple(c.in_place.items()) for c in captures}) >= _ADDRESS_VARIANTS:
                for c in captures:
                    self.moved_input_idxs |= c.moved(inputs)
                captures.clear()
            captured = self._capture(inputs, lends=True)
            captures.append(captured)
            return self._replay(captured, inputs)
        for captured in here:
            if captured.lends() and captured.outputs_free():
                return self._replay(captured, inputs)
        lending = sum(c.lends() for c in here) < _LENDING_CAPTURES
        copying = [c for c in here if not c.lends()]
        if lending or not copying:
            captured = self._capture(inputs, lends=lending)
            captures.append(captured)
        else:
            captured = copying[0]
        return self._replay(captured, inputs)


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
