"""Capturing the ops package's work (Note [Stream capture], core's
NPUGraphsUtils.h, through torch_npu._C's capture bindings; torch.npu.NPUGraph
comes with the graph package): fast-path kernels and the generic executor's
asynchronous kernels replay with the inputs' values at each replay, into
memory of a private pool; what needs the host to wait (data-dependent
output sizes), or random ops with a generator the capture did not register,
is refused."""

from __future__ import annotations

import pytest
import torch

import torch_npu

C = torch_npu._C

pytestmark = pytest.mark.skipif(
    not C._npu_is_capture_supported(), reason="the emulated CANN release has no model capture (8.1.RC1 and later)")


class Capture:
    """A minimal NPUGraph: capture on a side stream into a private pool."""

    def __init__(self) -> None:
        self.stream = torch.npu.Stream()
        self.pool = C._npu_graph_pool_handle()
        self.device = self.stream.device_index
        self.model = None

    def __enter__(self) -> "Capture":
        torch.npu.synchronize()
        self.stream.wait_stream(torch.npu.current_stream())
        self._stream_context = torch.npu.stream(self.stream)
        self._stream_context.__enter__()
        C._npu_beginAllocateCurrentStreamToPool(self.device, self.pool)
        C._npu_capture_begin(self.stream.stream_id, self.device, 0)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.model = C._npu_capture_end(self.stream.stream_id, self.device)
        finally:
            C._npu_endAllocateToPool(self.device, self.pool)
            self._stream_context.__exit__(*exc)

    def replay(self) -> None:
        # The replay reads what the current stream wrote (the inputs' copies):
        # it must wait for it, as NPUGraph.replay does. (Without the wait the
        # replay raced with the copies; NPU_SIM_RACE_CHECK=1 reports it.)
        self.stream.wait_stream(torch.npu.current_stream())
        C._npu_model_execute(self.model, self.stream.stream_id, self.device)
        torch.npu.current_stream().wait_stream(self.stream)

    def close(self) -> None:
        if self.model is not None:
            C._npu_model_destroy(self.model)
        C._npu_releasePool(self.device, self.pool)


def test_fast_path_and_executor_kernels_replay_with_new_inputs():
    x, y = torch.randn(6, 5).npu(), torch.randn(6, 5).npu()
    graph = Capture()
    with graph:
        z = x * y + 1  # fast path
        w = torch.cumsum(z, 0)  # generic executor
        out = torch.where(w > 0, w, torch.zeros_like(w))
    for _ in range(3):
        cx, cy = torch.randn(6, 5), torch.randn(6, 5)
        x.copy_(cx)
        y.copy_(cy)
        graph.replay()
        expected_w = torch.cumsum(cx * cy + 1, 0)
        torch.testing.assert_close(out.cpu(), torch.where(expected_w > 0, expected_w, torch.zeros_like(expected_w)))
    graph.close()


def test_in_place_work_accumulates_over_replays():
    x = torch.zeros(4).npu()
    graph = Capture()
    with graph:
        x.add_(1)
        x.mul_(2)
    assert torch.equal(x.cpu(), torch.zeros(4))
    for _ in range(3):
        graph.replay()
    assert torch.equal(x.cpu(), torch.full((4,), 14.0))  # ((0+1)*2+1)*2+1)*2
    graph.close()


def test_data_dependent_ops_and_unregistered_generators_are_refused():
    x = torch.randn(10).npu()
    graph = Capture()
    with pytest.raises(RuntimeError, match="ACL_ERROR_RT_STREAM_CAPTURED|invalidated"):
        with graph:
            torch.nonzero(x)
    graph.close()
    graph = Capture()
    # This bare capture registers no generator (torch.npu.NPUGraph registers
    # the device's default one): a random op says what to do.
    with pytest.raises(RuntimeError, match="register_generator_state"):
        with graph:
            torch.rand(3, device="npu")
    graph.close()
    torch.rand(3, device="npu")  # the generator is usable again
