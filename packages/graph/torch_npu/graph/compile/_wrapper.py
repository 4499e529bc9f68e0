"""Inductor's Python wrapper code for npu: calls MLIR kernels on the current
npu stream, e.g. ``mlir_fused_mul_0.run(arg0_1, arg1_1, buf0)``."""

from __future__ import annotations

from typing import Any

from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.stream_constants import DEFAULT_STREAM, STREAM_NAME_TEMPLATE
from torch._inductor.virtualized import V


class NPUWrapperCodegen(PythonWrapperCodegen):
    """The stock Python wrapper, with npu kernels called with their arguments
    only: they run on the current stream (Note [npu kernels find their
    stream])."""

    @staticmethod
    def create(is_subgraph: bool, subgraph_name: str | None, parent_wrapper: PythonWrapperCodegen | None,
               partition_signatures: Any = None) -> PythonWrapperCodegen:
        if is_subgraph:
            return SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return NPUWrapperCodegen()

    def __init__(self) -> None:
        super().__init__()
        self._streams_named = False

    # Note [Stream contexts in npu wrapper code]
    # A graph that uses streams (``torch.Stream``, ``with stream:``, events)
    # runs its nodes inside ``with default_stream:`` / ``with stream1:``
    # blocks. Inductor names those streams where it enters a device guard,
    # which it does only for the GPU types it knows (cuda, xpu, ...), not
    # for npu, whose kernels take the current stream and need no guard. So
    # the npu wrapper names them itself, once, before the first block: the
    # stream current when the compiled code is called, and the user's
    # streams, which Dynamo hands over as graph-external objects.
    def codegen_cuda_stream_enter(self, stream_idx: int) -> Any:
        if not self._streams_named:
            self._streams_named = True
            self._name_streams()
        return super().codegen_cuda_stream_enter(stream_idx)

    def _name_streams(self) -> None:
        scheduler = V.graph.scheduler
        self.writeline(f"{DEFAULT_STREAM} = {V.graph.device_ops.current_stream()}")
        user_streams = scheduler.stream_idx_to_user_obj_idx
        if not user_streams:
            return
        self.writeline("from torch._dynamo.graph_bytecode_inputs import get_external_object_by_index")
        for stream_idx in range(1, max(scheduler.node_to_stream.values(), default=0) + 1):
            self.writeline(f"{STREAM_NAME_TEMPLATE.format(stream_idx=stream_idx)} = "
                           f"get_external_object_by_index({user_streams[stream_idx]})")

    def write_header(self) -> None:
        super().write_header()
        self.header.writeline("from torch_npu.graph.compile.kernel import MLIRKernel")
        # The torch.ops.npu_inductor ops scatters run as (Note [Scatters run
        # as extern kernels]), for wrapper code loaded from Inductor's cache.
        self.header.writeline("import torch_npu.graph.compile._extern_scatters")

    # Note [npu kernels find their stream]
    # GPU wrapper code looks the current stream up in Python before each
    # kernel (``raw_stream0 = get_raw_stream(0)``; once per device guard,
    # which npu code does not enter, so once per kernel here) and passes it
    # in. An npu kernel's launcher looks it up itself, in C++, when it
    # launches (KernelLaunch.cpp): the same stream (the current one where
    # the call is, inside any ``with stream:`` block, Note [Stream contexts
    # in npu wrapper code]) without a Python call per kernel. MLIRKernel.run
    # still takes ``stream=`` for wrapper code cached by earlier versions.
    def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, *, device: Any = None,
                                     triton: bool = True, graph_name: str = "", **kwargs: Any) -> None:
        if device is None or device.type != "npu":
            return super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton,
                                                        graph_name=graph_name, **kwargs)
        self.writeline(f"{kernel_name}.run({', '.join(str(a) for a in call_args)})")

