"""Inductor's Python wrapper code for npu: calls MLIR kernels on the current
npu stream, e.g. ``mlir_fused_mul_0.run(arg0_1, arg1_1, buf0, stream=stream0)``."""

from __future__ import annotations

from typing import Any

from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen


class NPUWrapperCodegen(PythonWrapperCodegen):
    """The stock Python wrapper, with npu kernels called like GPU kernels
    (arguments, then the raw stream)."""

    @staticmethod
    def create(is_subgraph: bool, subgraph_name: str | None, parent_wrapper: PythonWrapperCodegen | None,
               partition_signatures: Any = None) -> PythonWrapperCodegen:
        if is_subgraph:
            return SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return NPUWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.header.writeline("from torch_npu.graph.compile.kernel import MLIRKernel")

    def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, *, device: Any = None,
                                     triton: bool = True, graph_name: str = "", **kwargs: Any) -> None:
        if device is None or device.type != "npu":
            return super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton,
                                                        graph_name=graph_name, **kwargs)
        stream = PythonWrapperCodegen.write_get_raw_stream(self, device.index, graph_name)
        self.writeline(f"{kernel_name}.run({', '.join(str(a) for a in call_args)}, stream={stream})")
