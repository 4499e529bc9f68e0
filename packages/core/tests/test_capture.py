"""Note [Stream capture] (csrc/npu/NPUGraphsUtils.h), on core's own work:
work launched on a capturing stream is recorded, not run, and runs at every
replay; events recorded in the capture get a generation per replay; the
host cannot synchronise with a capture, which then is invalidated."""

from __future__ import annotations

import pytest
import torch

import torch_npu

C = torch_npu._C
NONE, ACTIVE, INVALIDATED = 0, 1, 2

# Capture needs CANN 8.1.RC1 (the simulator emulates the release a matrix
# row names); test_capture_needs_cann_8_1 checks the refusal below it.
requires_capture = pytest.mark.skipif(
    not C._npu_is_capture_supported(), reason="the emulated CANN release has no model capture (8.1.RC1 and later)")


def _ids(stream: torch.npu.Stream) -> tuple[int, int]:
    return stream.stream_id, stream.device_index


@pytest.fixture
def side_stream():
    torch.npu.synchronize()
    stream = torch.npu.Stream()
    stream.wait_stream(torch.npu.current_stream())
    yield stream
    # A failed test may leave its capture open: end it, so later tests run.
    if C._npu_capture_status(*_ids(stream)) != NONE:
        try:
            C._npu_model_destroy(C._npu_capture_end(*_ids(stream)))
        except RuntimeError:
            pass
    torch.npu.synchronize()


@requires_capture
def test_capture_is_supported_and_idle_streams_do_not_capture(side_stream):
    assert C._npu_is_capture_supported()
    assert C._npu_capture_status(*_ids(side_stream)) == NONE


@requires_capture
def test_captured_work_runs_only_at_replays(side_stream):
    x = torch.zeros(4, 2, device="npu")
    src = torch.arange(8, dtype=torch.float32).reshape(2, 4).npu()
    torch.npu.synchronize()
    with torch.npu.stream(side_stream):
        C._npu_capture_begin(*_ids(side_stream), 0)
        assert C._npu_capture_status(*_ids(side_stream)) == ACTIVE
        x.copy_(src.t())  # core's strided copy kernel
        x[0].fill_(-1.0)
        model = C._npu_capture_end(*_ids(side_stream))
    assert C._npu_capture_status(*_ids(side_stream)) == NONE
    torch.npu.synchronize()
    assert torch.equal(x.cpu(), torch.zeros(4, 2))  # nothing ran at capture
    C._npu_model_execute(model, *_ids(side_stream))
    side_stream.synchronize()
    expected = torch.arange(8, dtype=torch.float32).reshape(2, 4).t().clone()
    expected[0] = -1
    assert torch.equal(x.cpu(), expected)
    # A replay reads its inputs when it runs.
    src.copy_(torch.full((2, 4), 5.0))
    torch.npu.synchronize()
    C._npu_model_execute(model, *_ids(side_stream))
    side_stream.synchronize()
    expected = torch.full((4, 2), 5.0)
    expected[0] = -1
    assert torch.equal(x.cpu(), expected)
    C._npu_model_destroy(model)


@requires_capture
def test_events_recorded_in_a_capture_get_a_generation_per_replay(side_stream):
    start = torch.npu.Event(enable_timing=True)
    end = torch.npu.Event(enable_timing=True)
    x = torch.zeros(1 << 16, device="npu")
    torch.npu.synchronize()
    with torch.npu.stream(side_stream):
        C._npu_capture_begin(*_ids(side_stream), 0)
        start.record(side_stream)
        x.fill_(1.0)
        end.record(side_stream)
        side_stream.wait_event(end)  # a wait inside the capture: on this replay's record
        model = C._npu_capture_end(*_ids(side_stream))
    for _ in range(3):
        C._npu_model_execute(model, *_ids(side_stream))
        end.synchronize()
        assert end.query() and start.elapsed_time(end) >= 0
    assert torch.equal(x.cpu(), torch.ones(1 << 16))
    C._npu_model_destroy(model)


@requires_capture
def test_synchronising_with_a_capture_raises_and_invalidates_it(side_stream):
    x = torch.zeros(4, device="npu")
    with torch.npu.stream(side_stream):
        C._npu_capture_begin(*_ids(side_stream), 0)
        x.fill_(2.0)
        with pytest.raises(RuntimeError, match="ACL_ERROR_RT_STREAM_CAPTURED.*do not synchronise"):
            side_stream.synchronize()
        assert C._npu_capture_status(*_ids(side_stream)) == INVALIDATED
        with pytest.raises(RuntimeError, match="capture was invalidated.*synchronising with the capturing stream"):
            C._npu_capture_end(*_ids(side_stream))
    assert C._npu_capture_status(*_ids(side_stream)) == NONE
    torch.npu.synchronize()  # the stream works again
    assert torch.equal(x.cpu(), torch.zeros(4))


@pytest.mark.parametrize("what", ["device", "item", "cpu", "empty_cache"])
@requires_capture
def test_host_waits_are_refused_during_capture(side_stream, what):
    x = torch.ones(4, device="npu")
    torch.npu.synchronize()
    with torch.npu.stream(side_stream):
        C._npu_capture_begin(*_ids(side_stream), 0)
        x.fill_(3.0)
        with pytest.raises(RuntimeError, match="ACL_ERROR_RT_STREAM_CAPTURED"):
            if what == "device":
                torch.npu.synchronize()
            elif what == "item":
                x[0].item()
            elif what == "cpu":
                x.cpu()
            else:
                torch.npu.empty_cache()
        with pytest.raises(RuntimeError, match="invalidated"):
            C._npu_capture_end(*_ids(side_stream))


@requires_capture
def test_capture_misuse_is_refused(side_stream):
    with pytest.raises(RuntimeError, match="ACL_ERROR_RT_STREAM_NOT_CAPTURED"):
        C._npu_capture_end(*_ids(side_stream))
    C._npu_capture_begin(*_ids(side_stream), 0)
    try:
        with pytest.raises(RuntimeError, match="already capturing"):
            C._npu_capture_begin(*_ids(side_stream), 0)
    finally:
        C._npu_model_destroy(C._npu_capture_end(*_ids(side_stream)))
    with pytest.raises(RuntimeError, match="not a live model"):
        C._npu_model_execute(12345678, *_ids(side_stream))


def test_capture_needs_cann_8_1(python_subprocess):
    proc = python_subprocess(
        """
        import torch, torch_npu
        s = torch.npu.Stream()
        print("SUPPORTED", torch_npu._C._npu_is_capture_supported())
        try:
            torch_npu._C._npu_capture_begin(s.stream_id, s.device_index, 0)
        except RuntimeError as e:
            print("REFUSED", "8.1.RC1" in str(e))
        """,
        env={"NPU_SIM_CANN_VERSION": "8.0.0"},
    )
    assert "SUPPORTED False" in proc.stdout and "REFUSED True" in proc.stdout, proc.stderr
