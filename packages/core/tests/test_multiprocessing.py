"""npu tensors through torch.multiprocessing: the receiver gets the sender's
device memory, not a copy (Note [npu tensors between processes],
torch_npu/multiprocessing/reductions.py)."""

from __future__ import annotations

import gc
import queue
import sys
from multiprocessing.reduction import ForkingPickler
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
import torch_npu

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ipc_worker  # noqa: E402

TIMEOUT = 120

# Sharing needs CANN's IPC memory (8.3.RC1 on) and IPC events (8.5.0 on): the
# matrix rows that emulate older releases check the refusal instead.
needs_ipc_memory = pytest.mark.skipif(
    not torch.npu.is_cann_feature_available("ipc_memory"),
    reason="the emulated CANN release has no IPC memory (test_sending_is_refused_without_ipc_memory runs instead)")
needs_ipc_event = pytest.mark.skipif(not torch.npu.is_cann_feature_available("ipc_event"),
                                     reason="the emulated CANN release has no IPC events")


class Worker:
    """A spawned process holding the tensors it is sent (_ipc_worker.serve)."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self.requests = ctx.Queue()
        self.replies = ctx.Queue()
        self.process = ctx.Process(target=_ipc_worker.serve, args=(self.requests, self.replies), daemon=True)
        self.process.start()

    def __call__(self, op: str, name: str = "", arg=None):
        self.requests.put((op, name, arg))
        for _ in range(TIMEOUT):
            try:
                status, reply = self.replies.get(timeout=1)
            except queue.Empty:
                assert self.process.is_alive(), f"the worker died with exit code {self.process.exitcode}"
                continue
            assert status == "ok", reply
            return reply
        raise TimeoutError(f"the worker did not answer {op!r} within {TIMEOUT} s")

    def close(self) -> None:
        if self.process.is_alive():
            self.requests.put(("exit", "", None))
            self.process.join(TIMEOUT)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


@needs_ipc_memory
def test_a_received_tensor_shares_the_senders_memory(worker):
    x = torch.arange(1024, dtype=torch.float32, device="npu")
    assert worker("hold", "x", x) == ("Tensor", "npu:0")
    worker("add", "x", 1.0)
    # The receiver's write is in the sender's tensor ...
    assert torch.equal(x.cpu(), torch.arange(1024, dtype=torch.float32) + 1)
    # ... and the sender's later write in the receiver's.
    x.fill_(7.0)
    torch.npu.synchronize()
    assert worker("values", "x") == [7.0] * 1024
    worker("release", "x")


@needs_ipc_memory
def test_views_keep_their_offset_and_strides(worker):
    base = torch.zeros(64, 8, dtype=torch.int32, device="npu")
    view = base[10:20, ::2]  # storage offset 80, strides (8, 2)
    assert view.storage_offset() == 80
    worker("hold", "view", view)
    worker("add", "view", 5)
    expected = torch.zeros(64, 8, dtype=torch.int32)
    expected[10:20, ::2] = 5
    assert torch.equal(base.cpu(), expected)
    worker("release", "view")


@needs_ipc_memory
def test_parameters_and_storages(worker):
    p = torch.nn.Parameter(torch.ones(3, device="npu"))
    assert worker("hold", "p", p) == ("Parameter", "npu:0")
    worker("add", "p", 2.0)
    assert p.detach().cpu().tolist() == [3.0, 3.0, 3.0]
    worker("release", "p")
    s = torch.full((4,), 9, dtype=torch.uint8, device="npu").untyped_storage()
    assert worker("hold", "s", s) == ("UntypedStorage", "npu:0")
    worker("release", "s")


@needs_ipc_memory
def test_the_sender_keeps_the_memory_until_the_receiver_released_it(worker):
    torch.npu.ipc_collect()
    before = torch.npu.memory_allocated()
    x = torch.ones(1 << 18, device="npu")  # 1 MiB
    address = x.data_ptr()
    worker("hold", "x", x)
    del x
    gc.collect()
    torch.npu.ipc_collect()
    # Still allocated for the receiver: new tensors do not get its memory,
    # and the receiver's writes land in it alone.
    y = torch.zeros(1 << 18, device="npu")
    assert y.data_ptr() != address
    assert torch.npu.memory_allocated() >= before + 2 * (1 << 20)
    worker("add", "x", 1.0)
    assert y.sum().item() == 0
    worker("release", "x")
    torch.npu.ipc_collect()
    del y
    assert torch.npu.memory_allocated() == before


@needs_ipc_memory
def test_a_receiver_forwards_what_it_received(worker):
    torch.npu.ipc_collect()
    before = torch.npu.memory_allocated()
    x = torch.zeros(256, device="npu")
    worker("hold", "x", x)
    y = worker("echo", "x")  # back here through the worker: the same memory
    y.fill_(4.0)
    torch.npu.synchronize()
    assert x.cpu().tolist() == [4.0] * 256
    assert worker("values", "x") == [4.0] * 256
    again = worker("echo", "x")  # the same key again gives the same storage
    assert again.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    worker("release", "x")
    del x, again
    gc.collect()
    torch.npu.ipc_collect()
    assert torch.npu.memory_allocated() > before  # `y` holds it, through the worker
    del y
    gc.collect()
    worker("collect")
    torch.npu.ipc_collect()
    assert torch.npu.memory_allocated() == before


@needs_ipc_memory
def test_a_process_started_with_an_npu_tensor_shares_it():
    torch.npu.ipc_collect()
    before = torch.npu.memory_allocated()
    x = torch.zeros(8, device="npu")
    process = mp.get_context("spawn").Process(target=_ipc_worker.add_and_exit, args=(x[2:6], 2.0))
    process.start()
    process.join(TIMEOUT)
    assert process.exitcode == 0
    assert x.cpu().tolist() == [0.0, 0.0, 2.0, 2.0, 2.0, 2.0, 0.0, 0.0]
    del x, process  # the Popen's copy of the release descriptor goes with it
    gc.collect()
    torch.npu.ipc_collect()
    assert torch.npu.memory_allocated() == before


@needs_ipc_memory
@needs_ipc_event
def test_an_interprocess_event_orders_the_receivers_stream(worker):
    x = torch.zeros(4, device="npu")
    event = torch.npu.Event(interprocess=True)
    worker("hold", "x", x)
    assert worker("hold", "event", event) == ("Event", "npu")
    stream = torch.npu.Stream()
    with torch.npu.stream(stream):
        torch.npu._sleep(200 * torch.npu._cycles_per_ms())  # the fill runs well after the wait began
        x.fill_(5.0)
        event.record()
    assert worker("wait_read", "event", "x") == [5.0] * 4
    assert worker("query", "event") is True
    worker("release", "x")
    worker("release", "event")


@needs_ipc_memory
@needs_ipc_event
def test_interprocess_event_misuse_fails_clearly():
    with pytest.raises(ValueError, match="cannot time"):
        torch.npu.Event(interprocess=True, enable_timing=True)
    with pytest.raises(RuntimeError, match="interprocess=True"):
        torch.npu.Event().ipc_handle()
    event = torch.npu.Event(interprocess=True)
    opened = torch.npu.Event.from_ipc_handle(0, event.ipc_handle())  # this process may open it too
    with pytest.raises(RuntimeError, match="cannot be recorded"):
        opened.record()
    event.record()
    opened.synchronize()
    assert opened.query() and event.query()


@needs_ipc_memory
def test_a_receiver_that_dies_releases_the_memory():
    torch.npu.ipc_collect()
    before = torch.npu.memory_allocated()
    w = Worker()
    try:
        x = torch.ones(1024, device="npu")
        w("hold", "x", x)
        del x
        torch.npu.ipc_collect()
        assert torch.npu.memory_allocated() > before
        w.process.kill()
        w.process.join(TIMEOUT)
    finally:
        w.close()
    torch.npu.ipc_collect()
    assert torch.npu.memory_allocated() == before


@needs_ipc_memory
def test_pickling_within_one_process_maps_the_same_memory():
    x = torch.zeros(16, device="npu")
    y = ForkingPickler.loads(ForkingPickler.dumps(x[4:]))
    assert y.device == x.device and y.shape == (12,)
    assert y.data_ptr() != x.data_ptr() + 16  # a second mapping, not the same pointer
    y.fill_(3.0)
    torch.npu.synchronize()
    assert x.cpu().tolist() == [0.0] * 4 + [3.0] * 12
    del y
    gc.collect()
    torch.npu.ipc_collect()


@needs_ipc_memory
def test_segments_are_shared_whole_with_the_blocks_offset():
    a = torch.empty(256, device="npu")  # small blocks share one 2 MiB segment
    b = torch.empty(256, device="npu")
    key_a, size_a, offset_a = torch_npu._C._npu_ipc_share_storage(a)
    key_b, size_b, offset_b = torch_npu._C._npu_ipc_share_storage(b)
    assert size_a == size_b >= 2 * (1 << 20)
    assert offset_a != offset_b
    assert b.data_ptr() - offset_b == a.data_ptr() - offset_a
    torch_npu._C._npu_ipc_close(key_a)
    torch_npu._C._npu_ipc_close(key_b)


@needs_ipc_memory
def test_tensors_autograd_cannot_send_fail_clearly():
    leaf = torch.ones(2, device="npu", requires_grad=True)
    with pytest.raises(RuntimeError, match="autograd does not cross process boundaries"):
        ForkingPickler.dumps(leaf * 2)
    cpu = torch.ones(2)
    assert torch.equal(ForkingPickler.loads(ForkingPickler.dumps(cpu)), cpu)  # CPU keeps torch's way


@needs_ipc_memory
def test_blocks_of_expandable_segments_are_shared(worker):
    from torch_npu.npu import memory

    torch.npu.synchronize()
    torch.npu.empty_cache()
    memory._set_allocator_settings("expandable_segments:True")
    try:
        # Blocks of an expandable segment live in mapped physical chunks
        # (the simulator's test_sim_ipc.py shares a range across two).
        head = torch.zeros(1536 * 1024, dtype=torch.uint8, device="npu")
        n = (1 << 20) + 4096  # a large block, in the segment after `head`
        allocated = torch.npu.memory_allocated()
        x = torch.zeros(n, dtype=torch.uint8, device="npu")
        block = torch.npu.memory_allocated() - allocated
        key, shared, offset = torch_npu._C._npu_ipc_share_storage(x)
        torch_npu._C._npu_ipc_close(key)
        assert (shared, offset) == (block, 0)  # the block alone, not the segment's range
        worker("hold", "x", x)
        worker("add", "x", 3)
        assert torch.equal(x.cpu(), torch.full((n,), 3, dtype=torch.uint8))
        assert head.sum().item() == 0
        worker("release", "x")
        del head, x
        torch.npu.ipc_collect()
    finally:
        torch.npu.synchronize()
        torch.npu.empty_cache()
        memory._set_allocator_settings("expandable_segments:False")


@pytest.mark.skipif(torch.npu.is_cann_feature_available("ipc_memory"), reason="the emulated CANN release has IPC memory")
def test_sending_is_refused_without_ipc_memory():
    with pytest.raises(RuntimeError, match=r"sharing device memory between processes .* needs CANN 8.3.RC1"):
        ForkingPickler.dumps(torch.ones(2, device="npu"))
