"""npu streams and events inside torch.compile: Dynamo traces them into the
graph (no graph break) and the wrapper code runs each kernel on its stream
(Note [npu streams and events under torch.compile] in torch_npu/npu/streams.py,
Note [Stream contexts in npu wrapper code] in compile/_wrapper.py, Note [Values
passed through control dependencies] in compile/_program.py)."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._inductor.utils import run_and_get_code

from torch_npu.graph.compile import _mlir

needs_mlir = pytest.mark.skipif(_mlir.torch_mlir_version() is None, reason="torch-mlir is not installed")


def _side_stream_npu_api(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # As code written for Ascend's torch_npu does it.
    side = torch.npu.Stream()
    ready = torch.npu.Event()
    y = torch.relu(x @ w)
    ready.record()
    with torch.npu.stream(side):
        side.wait_event(ready)
        z = (y * 2).sum(-1)
    torch.npu.current_stream().wait_stream(side)
    return z + 1, y.exp()


def _side_stream_generic_api(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # The same with PyTorch's device-generic classes.
    side = torch.Stream(device="npu")
    ready = torch.Event(device="npu")
    y = torch.relu(x @ w)
    ready.record()
    with side:
        side.wait_event(ready)
        z = (y * 2).sum(-1)
    torch.accelerator.current_stream().wait_stream(side)
    return z + 1, y.exp()


@needs_mlir
@pytest.mark.parametrize("fn", [_side_stream_npu_api, _side_stream_generic_api], ids=["torch.npu", "generic"])
def test_streams_and_events_compile_into_one_graph(fn):
    x, w = torch.randn(64, 128, device="npu"), torch.randn(128, 96, device="npu")
    explained = torch._dynamo.explain(fn)(x, w)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    torch._dynamo.reset()
    expected = fn(x, w)
    actual, codes = run_and_get_code(torch.compile(fn), x, w)
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)
    code = codes[0]
    # The kernel of the block runs inside the side stream's context, the
    # others on the stream that was current when the code was called.
    assert "default_stream = torch.npu.current_stream()" in code
    assert "stream1 = get_external_object_by_index(" in code
    side_block = code.split("with stream1:", 1)[1].split("with default_stream:", 1)[0]
    assert "torch.ops.streams.wait_event.default" in side_block
    assert "mlir_fused_" in side_block and ".run(" in side_block
    assert "torch.ops.streams.wait_stream.default" in code


def test_npu_stream_classes_stay_npu_classes_when_eager():
    # Only tracing sees the generic objects; eager code keeps torch_npu's.
    stream = torch.npu.Stream()
    event = torch.npu.Event(enable_timing=True)
    assert type(stream) is torch.npu.Stream and type(event) is torch.npu.Event
    assert type(torch.npu.current_stream()) is torch.npu.Stream
    with torch.npu.stream(stream):
        assert torch.npu.current_stream() == stream
    assert stream.npu_stream != 0
