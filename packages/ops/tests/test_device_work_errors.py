"""A failed op poisons what depends on it: the error surfaces at the first
synchronization that depends on the failed work, through streams and events
(Note [Device-work errors follow the dependencies], core's simulator), and a
failure nobody synchronized for ends the program with status 1."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch_npu  # noqa: F401


def _failing_op():
    # The index is checked by the kernel, in device work. The first call of a
    # signature waits for its kernel (Note [Errors at the call], ops'
    # csrc/CallVerification.h); a data-dependent error in a later one
    # surfaces at a synchronization.
    # The consumers' signatures too: verifying one synchronizes its stream,
    # which would report the failure there, before the test's own check.
    torch.zeros(10, device="npu").index_select(0, torch.tensor([1], device="npu")).mul(2).add(1)
    return torch.zeros(10, device="npu").index_select(0, torch.tensor([100], device="npu"))


def test_a_consumer_ordered_by_wait_stream_raises_instead_of_reading_unwritten_memory():
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        produced = _failing_op()
    torch.npu.current_stream().wait_stream(side)
    consumed = produced + 1
    with pytest.raises(RuntimeError, match=r"device work 'aten::index_select' failed: index out of range"):
        consumed.cpu()
    # reported once: the side stream and the device are clean afterwards
    side.synchronize()
    torch.npu.synchronize()


def test_the_error_travels_through_a_chain_of_events():
    first, second = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(first):
        torch.npu._sleep(50 * torch.npu._cycles_per_ms())  # the waits below are queued, not resolved at once
        produced = _failing_op()
        done_first = torch.npu.Event()
        done_first.record()
    with torch.npu.stream(second):
        second.wait_event(done_first)
        middle = produced * 2
        done_second = torch.npu.Event()
        done_second.record()
    torch.npu.current_stream().wait_event(done_second)
    with pytest.raises(RuntimeError, match="index out of range"):
        (middle + 1).cpu()
    torch.npu.synchronize()


def test_work_that_does_not_wait_for_the_failure_is_not_poisoned():
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        _failing_op()
    independent = torch.ones(3, device="npu") + 1  # default stream, no wait
    assert independent.cpu().tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match="index out of range"):
        side.synchronize()


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))


def test_a_failure_nobody_synchronized_for_ends_the_program_with_status_1():
    result = _run("""
        import torch, torch_npu
        torch.zeros(10, device="npu").index_select(0, torch.tensor([1], device="npu"))  # verified
        torch.zeros(10, device="npu").index_select(0, torch.tensor([100], device="npu"))
        print("end of script", flush=True)
    """)
    assert result.returncode == 1
    assert "end of script" in result.stdout
    assert "device work failed, and no synchronizing call reported it" in result.stderr
    assert "index out of range" in result.stderr and "Exiting with status 1" in result.stderr


def test_a_failure_already_reported_leaves_the_exit_status_alone():
    result = _run("""
        import torch, torch_npu
        torch.zeros(10, device="npu").index_select(0, torch.tensor([1], device="npu"))  # verified
        try:
            torch.zeros(10, device="npu").index_select(0, torch.tensor([100], device="npu")).cpu()
        except RuntimeError:
            print("caught", flush=True)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "caught" and "no synchronizing call" not in result.stderr
