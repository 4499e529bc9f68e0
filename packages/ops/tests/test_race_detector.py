"""The simulator's stream race detector (Note [Stream race detection]).

Kernels, copies and memsets on two streams that touch the same device memory
without an order between them are reported at the second launch, naming both
accesses; the same work ordered by ``wait_stream``, an event wait, a
synchronize or ``record_stream`` is silent.
"""

from __future__ import annotations

import os
import re

import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.npu import _race_check

N = 4096
THIS_FILE = os.path.basename(__file__)


def _warm_up() -> None:
    # The first call of an op signature waits for its kernel (Note [Errors at
    # the call]), which orders everything before it: the tests' races need
    # ops that already ran.
    a = torch.full((N,), 1.0, device="npu")
    b = a * 2
    b.add_(1)
    b.mul_(3)
    b.sum()
    b.copy_(a)
    b.zero_()
    b.fill_(3)
    torch.empty(N, device="npu").fill_(3)
    torch.nonzero(b)
    torch.npu.synchronize()


@pytest.fixture(autouse=True)
def race_check():
    _warm_up()
    with _race_check.enabled():
        yield
        torch.npu.synchronize()


def _filled(value: float) -> torch.Tensor:
    t = torch.full((N,), value, device="npu")
    torch.npu.synchronize()
    return t


def test_missing_wait_is_reported_with_both_accesses():
    a = _filled(1.0)
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        b = a * 2  # written on s1
    with torch.npu.stream(s2), pytest.raises(RuntimeError) as raised:
        b.add_(1)  # written on s2: nothing orders it after the write on s1
    message = str(raised.value)
    assert "NPU stream race (write-after-write)" in message
    assert "'aten::add_'" in message and "'aten::mul'" in message
    assert f"stream {s1.npu_stream:#x}" in message and f"stream {s2.npu_stream:#x}" in message
    # Both launch sites: the two lines of this test.
    assert len(re.findall(re.escape(THIS_FILE) + r":\d+", message)) == 2, message


def test_read_after_write_is_reported():
    a = _filled(1.0)
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        b = a * 2
    with torch.npu.stream(s2), pytest.raises(RuntimeError, match=r"read-after-write.*'aten::mul"):
        b.sum()


def test_write_after_read_is_reported():
    a = _filled(1.0)
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        a.sum()  # reads a
    with torch.npu.stream(s2), pytest.raises(RuntimeError, match=r"write-after-read"):
        a.mul_(3)


def test_data_dependent_ops_are_checked():
    # nonzero waits for its kernel (the result's size comes from the data):
    # its read is checked like any other.
    a = _filled(1.0)
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        b = a * 2
    with torch.npu.stream(s2), pytest.raises(RuntimeError, match=r"read-after-write.*'aten::nonzero"):
        torch.nonzero(b)
    s2.wait_stream(s1)
    with torch.npu.stream(s2):
        assert torch.nonzero(b).shape == (N, 1)


def test_concurrent_reads_are_not_races():
    a = _filled(1.0)
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        x = a * 2
    with torch.npu.stream(s2):
        y = a * 3
    torch.npu.synchronize()
    assert x.sum().item() == 2 * N and y.sum().item() == 3 * N


@pytest.mark.parametrize("order", ["wait_stream", "event", "synchronize", "stream_synchronize"])
def test_ordered_accesses_are_silent(order):
    a = _filled(1.0)
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        b = a * 2
    if order == "wait_stream":
        s2.wait_stream(s1)
    elif order == "event":
        event = torch.npu.Event()
        event.record(s1)
        s2.wait_event(event)
    elif order == "synchronize":
        torch.npu.synchronize()
    else:
        s1.synchronize()
    with torch.npu.stream(s2):
        b.add_(1)
        c = b.sum()
    torch.npu.current_stream().wait_stream(s2)
    assert c.item() == 3 * N


def test_an_event_recorded_before_the_write_does_not_order_it():
    a = _filled(1.0)
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    event = torch.npu.Event()
    event.record(s1)  # before the write
    with torch.npu.stream(s1):
        b = a * 2
    s2.wait_event(event)
    with torch.npu.stream(s2), pytest.raises(RuntimeError, match="read-after-write"):
        b.sum()


def _reuse_after_use_on_another_stream(record_stream: bool) -> tuple[int, int]:
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        x = torch.ones(N, device="npu")  # s1's memory
    s2.wait_stream(s1)
    with torch.npu.stream(s2):
        torch.npu._sleep(20 * torch.npu._cycles_per_ms())  # s2's read comes late
        y = x * 2
        if record_stream:
            x.record_stream(s2)
    old = x.data_ptr()
    del x
    with torch.npu.stream(s1):
        z = torch.empty(N, device="npu")
        z.fill_(3)  # the freed block, if reused, is written on s1
    torch.npu.synchronize()
    assert y.sum().item() == 2 * N
    return old, z.data_ptr()


def test_freeing_without_record_stream_is_reported_at_reuse():
    with pytest.raises(RuntimeError, match=r"write-after-read.*'aten::mul") as raised:
        _reuse_after_use_on_another_stream(record_stream=False)
    assert "'aten::fill_" in str(raised.value)


def test_record_stream_orders_the_reuse():
    _reuse_after_use_on_another_stream(record_stream=True)


def test_copy_racing_with_a_kernel_is_reported():
    a = _filled(1.0)
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        a.sum()  # a kernel reads a
    host = torch.full((N,), 5.0).pin_memory()
    with torch.npu.stream(s2), pytest.raises(RuntimeError) as raised:
        a.copy_(host, non_blocking=True)  # a copy writes it
    message = str(raised.value)
    assert "write-after-read" in message and "'memcpy'" in message and "'aten::sum" in message


def test_device_to_device_copy_and_memset_are_tracked():
    a = _filled(1.0)
    b = torch.empty(N, device="npu")
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        b.copy_(a)  # memcpy: reads a, writes b
    with torch.npu.stream(s2), pytest.raises(RuntimeError, match=r"'memset'.*'memcpy'"):
        b.zero_()  # memset


def test_detector_off_reports_nothing():
    a = _filled(1.0)
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with _race_check.enabled(False):
        assert not _race_check.is_enabled()
        with torch.npu.stream(s1):
            b = a * 2
        with torch.npu.stream(s2):
            b.sum()
        torch.npu.synchronize()
    assert _race_check.is_enabled()


def test_training_on_two_streams_done_right_is_silent():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    side = torch.npu.Stream()
    main = torch.npu.current_stream()
    losses = []
    for _ in range(3):
        x = torch.randn(16, 32, device="npu")
        target = torch.randn(16, 8, device="npu")
        # A side stream computes a statistic of the batch while the main
        # stream trains on it.
        side.wait_stream(main)
        with torch.npu.stream(side):
            scale = x.abs().mean()
        x.record_stream(side)
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        main.wait_stream(side)
        with torch.no_grad():
            for p in model.parameters():
                p.grad.mul_(scale.clamp(max=1.0))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.detach())
    torch.npu.synchronize()
    assert all(torch.isfinite(loss).item() for loss in losses)


def test_batch_norm_writes_its_running_statistics_only_in_training():
    bn = torch.nn.BatchNorm1d(8).npu()
    x = torch.randn(16, 8, device="npu")
    bn(x)
    bn.eval()
    bn(x)  # first calls of both signatures
    torch.npu.synchronize()
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    for s in (s1, s2):  # inference on two streams only reads the statistics
        s.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(s):
            bn(x)
    bn.train()
    bn.num_batches_tracked = None  # no counter update: only the kernel writes
    s1.wait_stream(s2)  # after the inference that read the statistics there
    with torch.npu.stream(s1):
        bn(x)
    with torch.npu.stream(s2), pytest.raises(RuntimeError, match=r"write-after-write.*'aten::native_batch_norm'"):
        bn(x)  # both update running_mean


def test_results_of_synchronous_ops_are_written_by_their_copy_item():
    # nonzero's result gets npu memory once its size is known, and a work
    # item on s1 copies the values there: reading it on s2 needs an order.
    a = _filled(1.0)
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        indices = torch.nonzero(a)
    with torch.npu.stream(s2), pytest.raises(RuntimeError, match=r"read-after-write.*'aten::nonzero"):
        indices.sum()
    s2.wait_stream(s1)
    with torch.npu.stream(s2):
        total = indices.sum()
    torch.npu.current_stream().wait_stream(s2)
    assert total.item() == N * (N - 1) // 2


def test_sparse_ops_declare_their_members_and_results():
    dense = _filled(2.0).reshape(64, 64)
    sparse = dense.to_sparse()
    values = sparse.values()
    sparse.to_dense()  # the first call waits for its kernel
    torch.npu.synchronize()
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        out = sparse.to_dense()
    with torch.npu.stream(s2), pytest.raises(RuntimeError, match=r"read-after-write.*'aten::_to_dense"):
        out.sum()
    s2.wait_stream(s1)
    with torch.npu.stream(s2):
        values.mul_(3)  # a sparse tensor's memory is its members'
    with torch.npu.stream(s1), pytest.raises(RuntimeError, match=r"read-after-write.*'aten::_to_dense.*'aten::mul_"):
        sparse.to_dense()
    s1.wait_stream(s2)
    with torch.npu.stream(s1):
        total = sparse.to_dense().sum()
    torch.npu.current_stream().wait_stream(s1)
    assert total.item() == 6 * N


def test_interleaved_views_do_not_overlap():
    # Up to 64 dense runs a view is declared exactly (WorkAccesses.h).
    warm = _filled(1.0)[:64].reshape(32, 2)
    warm[:, 0].mul_(2)
    warm[:, 0].add_(1)  # first calls of the strided signatures
    a = _filled(1.0)[:64].reshape(32, 2)
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        a[:, 0].mul_(2)
    with torch.npu.stream(s2):
        a[:, 1].mul_(3)  # the other column: no byte in common
    with torch.npu.stream(s2), pytest.raises(RuntimeError, match="write-after-write"):
        a[:, 0].add_(1)
    torch.npu.synchronize()
    assert a[:, 0].sum().item() == 64 and a[:, 1].sum().item() == 96


def test_an_ops_first_call_does_not_hide_a_race():
    # The first call of a signature waits for its kernel (Note [Errors at
    # the call]); a device would not, so the wait orders nothing.
    a = _filled(0.5)
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        b = torch.atan2(a, a)  # the first atan2 of this process
    with torch.npu.stream(s2), pytest.raises(RuntimeError, match=r"read-after-write.*'aten::atan2"):
        b.sum()
