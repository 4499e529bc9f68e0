"""ProcessGroupHCCL: torch.distributed's hccl backend between npu processes.

Each test runs one Python process per rank (rank r on npu:r), joined through
a file store; the checks run inside the ranks, which print what the test
compares. The simulator's HCCL carries the data (through shared memory).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PRELUDE = """\
import os, sys, time, warnings
warnings.filterwarnings("ignore", category=FutureWarning)  # torch's renamings of collectives
import torch, torch_npu
import torch.distributed as dist
rank, world = int(sys.argv[1]), int(sys.argv[2])
torch.npu.set_device(rank)
dist.init_process_group("hccl", init_method=f"file://{sys.argv[3]}", rank=rank, world_size=world)


def error_of(fn, synchronize=False):
    # What fn() (then a synchronize, if asked) raised, as one line
    # "<type>: <message>"; "no error" if nothing.
    try:
        fn()
        if synchronize:
            torch.npu.synchronize()
    except Exception as e:
        return f"{type(e).__name__}: {e}".replace("\\n", " ")
    return "no error"


def error_after_sync(fn):
    return error_of(fn, synchronize=True)
"""


def run_ranks(tmp_path: Path, body: str, world: int = 2, timeout: float = 120,
              prelude: str = PRELUDE) -> list[str]:
    """Runs `body` on `world` ranks; returns each rank's stdout (all must succeed)."""
    script = tmp_path / "rank.py"
    script.write_text(prelude + textwrap.dedent(body))
    store = tmp_path / "store"
    procs = [subprocess.Popen([sys.executable, str(script), str(rank), str(world), str(store)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank in range(world)]
    outputs = []
    try:
        for rank, proc in enumerate(procs):
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, f"rank {rank} failed:\nstdout:\n{out}\nstderr:\n{err}"
            outputs.append(out)
    finally:
        for proc in procs:
            proc.kill()
    return outputs


def test_backend_is_registered_for_npu():
    import torch.distributed as dist

    import torch_npu.distributed

    assert torch_npu.distributed.is_hccl_available()
    assert dist.is_hccl_available()
    assert "hccl" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map["npu"] == "hccl"


def test_collectives_give_the_expected_values(tmp_path):
    outputs = run_ranks(tmp_path, """
        def check(name, got, expected):
            got = got.cpu()
            assert got.dtype == expected.dtype and torch.equal(got, expected), (name, got, expected)
            print(name)

        r = rank + 1  # 1 and 2
        for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64,
                      torch.int32, torch.int8, torch.uint8):
            for op, expected in [(dist.ReduceOp.SUM, 3), (dist.ReduceOp.PRODUCT, 2),
                                 (dist.ReduceOp.MAX, 2), (dist.ReduceOp.MIN, 1)]:
                t = torch.full((3, 5), r, dtype=dtype).npu()
                dist.all_reduce(t, op=op)
                check(f"all_reduce {dtype} {op}", t, torch.full((3, 5), expected, dtype=dtype))
        t = torch.tensor([1.0, 2.0]).npu() * r
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        check("all_reduce avg", t, torch.tensor([1.5, 3.0]))
        b = torch.tensor([rank == 0, rank == 1, False]).npu()
        dist.all_reduce(b)  # logical or
        check("all_reduce bool", b, torch.tensor([True, True, False]))
        c = torch.tensor([1 + 2j, -1j], dtype=torch.complex64).npu() * r
        dist.all_reduce(c)
        check("all_reduce complex", c, torch.tensor([3 + 6j, -3j], dtype=torch.complex64))

        x = torch.arange(6, dtype=torch.float32).reshape(2, 3).npu() + 10 * rank
        dist.broadcast(x, src=1)
        check("broadcast", x, torch.arange(6, dtype=torch.float32).reshape(2, 3) + 10)
        y = torch.full((4,), float(r)).npu()
        dist.reduce(y, dst=0, op=dist.ReduceOp.SUM)
        check("reduce", y, torch.full((4,), 3.0 if rank == 0 else 2.0))

        mine = torch.tensor([rank, rank * 10], dtype=torch.int64).npu()
        parts = [torch.empty(2, dtype=torch.int64).npu() for _ in range(world)]
        dist.all_gather(parts, mine)
        check("all_gather", torch.stack([p.cpu() for p in parts]), torch.tensor([[0, 0], [1, 10]]))
        flat = torch.empty(4, dtype=torch.int64).npu()
        dist.all_gather_into_tensor(flat, mine)
        check("all_gather_into_tensor", flat, torch.tensor([0, 0, 1, 10]))

        out = torch.empty(2).npu()
        dist.reduce_scatter(out, [torch.full((2,), float(r * (j + 1))).npu() for j in range(world)])
        check("reduce_scatter", out, torch.full((2,), 3.0 * (rank + 1)))
        out = torch.empty(3).npu()
        dist.reduce_scatter_tensor(out, torch.arange(6.0).npu() * r, op=dist.ReduceOp.MAX)
        check("reduce_scatter_tensor", out, torch.arange(6.0)[3 * rank:3 * rank + 3] * 2)

        # Coalesced forms (what FSDP and DTensor use).
        ins = [torch.full((2,), float(rank + i)).npu() for i in range(3)]
        outs = [torch.empty(4).npu() for _ in range(3)]
        with dist._coalescing_manager(async_ops=False):
            for o, i in zip(outs, ins):
                dist.all_gather_into_tensor(o, i)
        check("all_gather_into_tensor coalesced", torch.stack([o.cpu() for o in outs]),
              torch.tensor([[0.0, 0, 1, 1], [1, 1, 2, 2], [2, 2, 3, 3]]))
        pieces = [torch.empty(1).npu() for _ in range(2)]
        with dist._coalescing_manager(async_ops=False):
            for o in pieces:
                dist.reduce_scatter_tensor(o, torch.tensor([1.0, 2.0]).npu() * r)
        check("reduce_scatter_tensor coalesced", torch.cat([o.cpu() for o in pieces]),
              torch.full((2,), 3.0 * (rank + 1)))
        ts = [torch.ones(2).npu(), torch.ones(3).npu() * 2]
        dist.all_reduce_coalesced(ts)
        check("all_reduce_coalesced", torch.cat([t.cpu() for t in ts]), torch.tensor([2.0, 2, 4, 4, 4]))

        work = dist.all_reduce(torch.ones(8).npu(), async_op=True)
        work.wait()
        fut = dist.all_reduce(torch.ones(8).npu(), async_op=True).get_future()
        check("future", fut.wait()[0], torch.full((8,), 2.0))
        dist.barrier()
        print("barrier")
        dist.destroy_process_group()
    """)
    assert outputs[0] == outputs[1]
    names = outputs[0].splitlines()
    assert len(names) == 8 * 4 + 14 and names[-1] == "barrier", names


def test_collectives_are_ordered_with_the_streams_and_do_not_block_the_host(tmp_path):
    outputs = run_ranks(tmp_path, """
        dist.all_reduce(torch.ones(1).npu())  # creates the communicator
        torch.npu.synchronize()
        s = torch.npu.Stream()
        with torch.npu.stream(s):
            # The input is written by work queued behind 300 ms of device time
            # on another stream: the collective must wait for it, and the host
            # must not.
            torch.npu._sleep(300 * torch.npu._cycles_per_ms())
            t = torch.full((1000,), float(rank + 1)).npu()
            work = dist.all_reduce(t, async_op=True)
            done_at_once = work.is_completed()
            work.wait()  # the current stream (s) waits; the host does not
            doubled = t * 2  # runs after the collective, on s
        torch.npu.synchronize()
        print(done_at_once, work.is_completed(), doubled[0].item(), doubled.sum().item())
        dist.destroy_process_group()
    """)
    for out in outputs:
        assert out == "False True 6.0 6000.0\n"


def test_ddp_training_matches_single_process_training(tmp_path):
    outputs = run_ranks(tmp_path, """
        import copy
        from torch.nn.parallel import DistributedDataParallel as DDP

        torch.manual_seed(0)
        reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                        torch.nn.Linear(16, 4))
        model = DDP(copy.deepcopy(reference).npu())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(1)
        for step in range(5):
            x = torch.randn(8, 8, generator=g)
            y = torch.randn(8, 4, generator=g)
            # Reference: the whole batch in one process, on the CPU.
            ref_opt.zero_grad()
            torch.nn.functional.mse_loss(reference(x), y).backward()
            ref_opt.step()
            # DDP: each rank takes half the batch; gradients are averaged.
            half = slice(4 * rank, 4 * rank + 4)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x[half].npu()), y[half].npu()).backward()
            opt.step()
        worst = max((p.detach().cpu() - q.detach()).abs().max().item()
                    for p, q in zip(model.module.parameters(), reference.parameters()))
        print(worst < 1e-5, worst)
        dist.destroy_process_group()
    """)
    for out in outputs:
        assert out.startswith("True "), out


def test_ddp_runtime_statistics_are_collected_on_npu(tmp_path):
    # DDP's logger times the forward, backward and communication with the
    # device's timer (DdpTimer.cpp), as with CUDA, instead of warning that
    # only CPU and CUDA are timed.
    outputs = run_ranks(tmp_path, """
        import warnings
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                        torch.nn.Linear(256, 64)).npu())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                model(torch.randn(32, 64).npu()).sum().backward()
        data = model._get_ddp_logging_data()
        times = [data.get(k, 0) for k in ("avg_forward_compute_time", "avg_backward_compute_time",
                                          "avg_backward_comm_time")]
        print(all(t > 0 for t in times), times)
        dist.destroy_process_group()
    """)
    for out in outputs:
        assert out.startswith("True "), out


def _rank_table(path: Path, devices: list[tuple[str, str]], server: str = "127.0.0.1") -> Path:
    """A rank table of one server with (device_id, rank_id) entries, as CANN's tools write it."""
    path.write_text(json.dumps({
        "version": "1.0", "status": "completed", "server_count": "1",
        "server_list": [{"server_id": server, "host_nic_ip": "reserve",
                         "device": [{"device_id": d, "device_ip": f"192.168.1.{d}", "rank_id": r}
                                    for d, r in devices]}]}))
    return path


def test_rank_table_makes_the_default_groups_communicator(tmp_path, monkeypatch):
    # RANK_TABLE_FILE: the default group's communicator comes from the table
    # (HcclCommInitClusterInfoConfig); a group made later uses a root info.
    monkeypatch.setenv("RANK_TABLE_FILE", str(_rank_table(tmp_path / "rank_table.json", [("0", "0"), ("1", "1")])))
    outputs = run_ranks(tmp_path, """
        t = torch.full((4,), float(rank + 1)).npu()
        dist.all_reduce(t)
        sub = dist.new_group([0, 1])
        u = torch.ones(2).npu()
        dist.all_reduce(u, group=sub)
        print(t.cpu().tolist(), u.cpu().tolist())
        dist.destroy_process_group()
    """)
    for out in outputs:
        assert out.split("\n")[0] == "[3.0, 3.0, 3.0, 3.0] [2.0, 2.0]", out


@pytest.mark.parametrize(("table", "message"), [
    (None, "rank table file .* cannot be read"),
    ('{"status": "completed", "server_list": [', "not valid JSON at line 1, column 41"),
    ('{"status": "building", "server_list": []}', "not \"completed\""),
    ([("0", "1")], "rank ids are not 0..0: rank 0 is missing"),
    ([("1", "0")], "rank 0 is device 1 of server 127.0.0.1 .* the calling thread's device is 0"),
    ([("0", "0"), ("1", "1")], "lists 2 ranks, but the process group has 1"),
], ids=["missing", "malformed", "unfinished", "rank_missing", "other_device", "other_size"])
def test_a_bad_rank_table_is_a_clear_error(tmp_path, monkeypatch, table, message):
    path = tmp_path / "rank_table.json"
    if isinstance(table, str):
        path.write_text(table)
    elif table is not None:
        _rank_table(path, table)
    monkeypatch.setenv("RANK_TABLE_FILE", str(path))
    script = tmp_path / "rank.py"
    # Raised by init_process_group (a table of another size) or by the first
    # collective, which makes the communicator.
    script.write_text(textwrap.dedent("""
        import sys
        import torch, torch_npu
        import torch.distributed as dist
        torch.npu.set_device(0)
        try:
            dist.init_process_group("hccl", init_method=f"file://{sys.argv[1]}", rank=0, world_size=1)
            dist.all_reduce(torch.ones(2).npu())
            print("no error")
        except Exception as e:
            print(type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    """))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "store")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert re.search(message, done.stdout), done.stdout


def test_subgroups_and_the_default_backend(tmp_path):
    prelude = PRELUDE.replace('dist.init_process_group("hccl", ', "dist.init_process_group(")
    outputs = run_ranks(tmp_path, """
        # No backend named: as with cuda and nccl, torch takes the accelerator's.
        print(dist.get_backend_config())
        pair = dist.new_group([0, 1], backend="hccl")
        singles = [dist.new_group([r], backend="hccl") for r in range(world)]
        t = torch.full((2,), float(rank + 1)).npu()
        dist.all_reduce(t, group=singles[rank])  # a group of one: unchanged
        print(t.tolist())
        dist.all_reduce(t, group=pair)
        print(t.tolist())
        dist.destroy_process_group()
    """, prelude=prelude)
    for rank, out in enumerate(outputs):
        assert out.splitlines() == ["npu:hccl", str([rank + 1.0] * 2), "[3.0, 3.0]"], out


def test_bad_input_says_what_to_do(tmp_path):
    outputs = run_ranks(tmp_path, """
        print(error_of(lambda: dist.all_reduce(torch.ones(2).npu(), op=dist.ReduceOp.BAND)))
        print(error_of(lambda: dist.all_reduce(torch.ones(4, 4).npu().t())))
        print(error_of(lambda: dist.all_gather_into_tensor(torch.empty(3).npu(),
                                                           torch.ones(2).npu())))
        # The group still works after refused calls.
        t = torch.ones(2).npu()
        dist.all_reduce(t)
        print(t.tolist())
        dist.destroy_process_group()
    """)
    for out in outputs:
        band, strided, sizes, after = out.splitlines()
        assert "ReduceOp.BAND" in band and "SUM, PRODUCT, MAX and MIN" in band, band
        assert "must be contiguous" in strided, strided
        assert "world size (2) times the input's elements" in sizes, sizes
        assert after == "[2.0, 2.0]"


def test_a_rank_that_dies_fails_the_collective_on_the_others(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(PRELUDE + textwrap.dedent("""
        t = torch.ones(4).npu()
        dist.all_reduce(t)  # both ranks: the communicator exists
        torch.npu.synchronize()
        if rank == 1:
            os._exit(3)
        dist.all_reduce(t)
        try:
            torch.npu.synchronize()
        except RuntimeError as e:
            print("error:", e)
        os._exit(0)
    """))
    procs = [subprocess.Popen([sys.executable, str(script), str(r), "2", str(tmp_path / "store")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    out0, err0 = procs[0].communicate(timeout=120)
    procs[1].communicate(timeout=120)
    assert procs[1].returncode == 3
    assert "error:" in out0, (out0, err0)
    assert "HcclAllReduce failed on rank 0 of 2" in out0
    assert "rank 1 (process" in out0 and "exited before the collective completed" in out0


def test_mismatched_collectives_fail_every_rank_and_abort_the_group(tmp_path):
    outputs = run_ranks(tmp_path, """
        t = torch.ones(1024).npu()
        dist.all_reduce(t)  # matched: collective #1
        # Collective #2: all_reduce on rank 0, broadcast on rank 1.
        if rank == 0:
            dist.all_reduce(t)
        else:
            dist.broadcast(t, src=0)
        print(error_of(torch.npu.synchronize))
        # The group's communicator is aborted: a later call fails at once.
        print(error_of(lambda: dist.all_reduce(t)))
        # Another group of the same ranks is unaffected; there a shape mismatch.
        other = dist.new_group(backend="hccl")
        u = torch.full((4,), rank + 1.0).npu()
        dist.all_reduce(u, group=other)
        print(u.tolist())
        dist.all_reduce(torch.ones(8 if rank == 0 else 6).npu(), group=other)
        print(error_of(torch.npu.synchronize))
        dist.destroy_process_group()
    """)
    for rank, out in enumerate(outputs):
        failure, refusal, other, shape = out.splitlines()
        api = "HcclAllReduce" if rank == 0 else "HcclBroadcast"
        both_sides = ("rank 0 called HcclAllReduce(count=1024, float32, sum) as collective #2, "
                      "rank 1 called HcclBroadcast(count=1024, float32, root=0) as collective #2")
        assert failure.startswith("RuntimeError") and both_sides in failure, failure
        assert f"{api} failed on rank {rank} of 2" in failure, failure
        assert refusal.startswith("DistBackendError") and "was aborted" in refusal, refusal
        assert both_sides in refusal, refusal
        assert other == "[3.0, 3.0, 3.0, 3.0]"
        assert ("rank 0 called HcclAllReduce(count=8, float32, sum) as collective #2, rank 1 "
                "called HcclAllReduce(count=6, float32, sum)") in shape, shape


def test_reinit_process_group_rebuilds_failed_communicators(tmp_path):
    # Note [Rebuilding a group's communicators]: after a mismatch aborted the
    # group's communicator, every rank calls reinit_process_group and the
    # group's collectives work again, without destroying it.
    outputs = run_ranks(tmp_path, """
        import torch_npu.distributed as npu_dist
        assert dist.reinit_process_group is npu_dist.reinit_process_group  # as torch_npu patches it
        t = torch.ones(1024).npu()
        dist.all_reduce(t)
        # Healthy: resuming keeps the communicators, and rebuilding them between
        # matched collectives changes no result.
        assert dist.reinit_process_group(rebuild_link=False) is None
        assert dist.reinit_process_group() is dist.group.WORLD
        dist.all_reduce(t)
        print(t[:2].tolist())
        if rank == 0:
            dist.all_reduce(t)
        else:
            dist.broadcast(t, src=0)
        print(error_of(torch.npu.synchronize).split(":")[0])
        print(error_of(lambda: dist.all_reduce(t)).split(":")[0])
        print(error_of(lambda: dist.reinit_process_group(rebuild_link=False)))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dist.reinit_process_group()
        # The failure was reported above, once: the rebuild does not repeat it.
        print([str(w.message) for w in caught])
        u = torch.full((4,), rank + 1.0).npu()
        dist.all_reduce(u)
        dist.broadcast(u, src=1)
        print(u.tolist())
        dist.destroy_process_group()
    """)
    for out in outputs:
        before, failure, refusal, resume, warned, after = out.splitlines()
        assert before == "[4.0, 4.0]"
        assert failure == "RuntimeError" and refusal == "DistBackendError"
        assert resume.startswith("DistBackendError") and "cannot be resumed" in resume, resume
        assert "reinit_process_group(group) on every rank" in resume, resume
        assert warned == "[]", warned
        assert after == "[3.0, 3.0, 3.0, 3.0]"


@pytest.mark.parametrize("first,handling", [("collective", None), ("send", None), ("send", "0")])
def test_a_collective_facing_a_send_fails_both_ranks_at_once(tmp_path, first, handling):
    # Note [Point-to-point meets a collective] (simulator): rank 0
    # all-reduces while rank 1 sends to it, whichever comes first. Both fail
    # with the same message, long before the group's 30-minute timeout, and
    # each rank's watchdog reports the failed communicator on stderr (Note
    # [Watchdog and heartbeat monitor]), unless HCCL_ASYNC_ERROR_HANDLING=0.
    script = tmp_path / "rank.py"
    script.write_text(PRELUDE + textwrap.dedent(f"""
        t = torch.ones(4).npu()
        dist.all_reduce(t)  # matched: collective #1
        torch.npu.synchronize()
        if (rank == 0) != ({first!r} == "collective"):
            time.sleep(0.5)  # the other rank's call is waiting already
        if rank == 0:
            dist.all_reduce(t)
        else:
            dist.send(t, dst=0)
        try:
            torch.npu.synchronize()
            print("no error")
        except RuntimeError as e:
            print(str(e).replace("\\n", " "))
        time.sleep(1)  # the watchdog passes every 100 ms
        os._exit(0)
    """))
    env = dict(os.environ)
    if handling is not None:
        env["HCCL_ASYNC_ERROR_HANDLING"] = handling
    procs = [subprocess.Popen([sys.executable, str(script), str(r), "2", str(tmp_path / "store")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for r in range(2)]
    results = [proc.communicate(timeout=120) for proc in procs]
    both_sides = ("rank 0 called HcclAllReduce(count=4, float32, sum) as collective #2, rank 1 "
                  "called HcclSend(count=4, float32, to rank 0): a send or receive cannot "
                  "complete while its peer is inside a collective")
    for rank, (out, err) in enumerate(results):
        api = "HcclAllReduce" if rank == 0 else "HcclSend"
        assert f"{api} failed on rank {rank} of 2: {both_sides}" in out, (out, err)
        report = (f"[rank {rank}] ProcessGroupHCCL watchdog: the hccl communicator of npu:{rank} "
                  "failed (HCCL_E_PARA)")
        assert (report in err) == (handling != "0"), err


TIMEOUT_PRELUDE = PRELUDE.replace(
    "world_size=world)", "world_size=world,\n                        timeout=__import__('datetime').timedelta(seconds=2))")


def test_the_group_timeout_bounds_every_collective(tmp_path):
    # Rank 1 is alive but skips the second all_reduce: rank 0 fails after the
    # group's 2 s (not HCCL_EXEC_TIMEOUT's 1836 s), naming the collective,
    # its sequence number and the rank that did not arrive.
    outputs = run_ranks(tmp_path, """
        t = torch.ones(4).npu()
        dist.all_reduce(t)
        torch.npu.synchronize()
        if rank == 1:
            time.sleep(4)
            os._exit(0)
        dist.all_reduce(t)
        try:
            torch.npu.synchronize()
        except RuntimeError as e:
            print("error:", str(e).replace("\\n", " "))
        os._exit(0)
    """, prelude=TIMEOUT_PRELUDE)
    assert ("HcclAllReduce(count=4, float32, sum), collective #2 of this communicator timed "
            "out after 2 s waiting for rank(s) 1 (rank 0 of 2), which did not arrive") in outputs[0]
    assert "hcclExecTimeOut (torch.distributed: the process group's timeout)" in outputs[0]


def test_the_group_timeout_bounds_connecting(tmp_path):
    # Rank 1 never makes a collective: rank 0's first one, which creates the
    # communicator, fails after the group's 2 s naming rank 1.
    outputs = run_ranks(tmp_path, """
        if rank == 1:
            time.sleep(4)
            os._exit(0)
        try:
            dist.all_reduce(torch.ones(4).npu())
        except Exception as e:
            print(type(e).__name__, e)
        os._exit(0)
    """, prelude=TIMEOUT_PRELUDE)
    assert outputs[0].startswith("DistBackendError ProcessGroupHCCL: rank(s) 1 of 2 did not "
                                 "arrive within 2000 ms (the process group's timeout)"), outputs[0]


@pytest.mark.parametrize("monitoring", ["1", "0"])
def test_the_heartbeat_monitor_ends_a_process_whose_watchdog_is_stuck(tmp_path, monitoring):
    # Note [Watchdog and heartbeat monitor]: the watchdog stops beating (a
    # test-only hook standing for a call that never returns); with
    # TORCH_HCCL_ENABLE_MONITORING=1 the monitor aborts the process once
    # TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC has passed, saying why; with 0 nothing
    # watches the watchdog and the process carries on and exits normally.
    script = tmp_path / "rank.py"
    script.write_text(PRELUDE + textwrap.dedent("""
        t = torch.ones(4).npu()
        dist.all_reduce(t)
        torch.npu.synchronize()
        time.sleep(4)  # far beyond the heartbeat timeout
        print("alive", t.cpu().tolist())
        dist.destroy_process_group()
    """))
    env = dict(os.environ, TORCH_HCCL_ENABLE_MONITORING=monitoring,
               TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC="1", TORCH_NPU_TEST_STALL_WATCHDOG="1")
    done = subprocess.run([sys.executable, str(script), "0", "1", str(tmp_path / "store")],
                          capture_output=True, text=True, env=env, timeout=120)
    if monitoring == "1":
        assert done.returncode == -signal.SIGABRT, (done.returncode, done.stdout, done.stderr)
        assert "alive" not in done.stdout
        assert ("[rank 0] ProcessGroupHCCL heartbeat monitor: the process group's watchdog "
                "thread has not made progress for ") in done.stderr, done.stderr
        assert "(TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC=1)" in done.stderr
        assert "Communicators it watches: npu:0." in done.stderr
    else:
        assert done.returncode == 0, done.stderr
        assert done.stdout == "alive [1.0, 1.0, 1.0, 1.0]\n"
        assert "heartbeat monitor" not in done.stderr


def test_bad_monitoring_settings_are_refused(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent("""
        import sys, torch, torch_npu
        import torch.distributed as dist
        try:
            dist.init_process_group("hccl", init_method=f"file://{sys.argv[1]}", rank=0,
                                    world_size=1)
            dist.all_reduce(torch.ones(1).npu())
        except Exception as e:
            print(type(e).__name__, e)
    """))
    for name, value, words in [
            ("TORCH_HCCL_ENABLE_MONITORING", "yes", "TORCH_HCCL_ENABLE_MONITORING='yes' is not valid"),
            ("HCCL_ASYNC_ERROR_HANDLING", "on", "HCCL_ASYNC_ERROR_HANDLING='on' is not valid: use 1"),
            ("TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC", "0",
             "TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC='0' is not valid: give a positive whole number")]:
        done = subprocess.run([sys.executable, str(script), str(tmp_path / f"store{name}")],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, **{name: value}))
        assert words in done.stdout, (done.stdout, done.stderr)


def test_distributed_debug_detail_checks_collective_fingerprints(tmp_path, monkeypatch):
    # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps the group in torch's checking
    # wrapper, which needs sequence numbers and compares every collective's
    # fingerprint (through gloo) before running it.
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    outputs = run_ranks(tmp_path, """
        t = torch.full((4,), rank + 1.0).npu()
        dist.all_reduce(t)
        print(t.tolist())
        backend = dist.group.WORLD._get_backend(torch.device("npu"))
        print(backend._get_sequence_number_for_group())
        try:
            dist.all_reduce(torch.ones(4 if rank == 0 else 3).npu())
        except RuntimeError as e:
            print("error:", str(e).replace("\\n", " "))
        dist.destroy_process_group()
    """)
    for out in outputs:
        values, seq, error = out.splitlines()
        assert values == "[3.0, 3.0, 3.0, 3.0]"
        assert seq == "1"
        assert "Detected mismatch between collectives on ranks" in error, error
        assert "Tensor shapes" in error, error


REUSE_BODY = """
    dist.all_reduce(torch.ones(1).npu())  # creates the communicator
    torch.npu.synchronize()
    t = torch.full((1 << 20,), float(rank + 1), device="npu")
    ptr = t.data_ptr()
    # The collective waits for 200 ms of device time queued before it, so
    # the communicator stream is still busy when `t` is freed below.
    torch.npu._sleep(200 * torch.npu._cycles_per_ms())
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    # The last references (the work holds its outputs); no kernel ran on
    # `t` here, whose work item would hold it too.
    del t, work
    u = torch.empty(1 << 20, device="npu")
    print(u.data_ptr() == ptr)
    torch.npu.synchronize()
    dist.destroy_process_group()
"""


@pytest.mark.parametrize("mode, reused", [("0", False), ("1", True), ("", True), ("2", True)])
def test_multi_stream_memory_reuse(tmp_path, monkeypatch, mode, reused):
    # Note [Multi-stream memory reuse] (ProcessGroupHCCL.h): with 0 the freed
    # memory waits for the communicator stream; with 1 (the default) and 2 it
    # is reused at once, the current stream being ordered after the
    # collective by wait().
    monkeypatch.setenv("MULTI_STREAM_MEMORY_REUSE", mode)
    outputs = run_ranks(tmp_path, REUSE_BODY)
    for out in outputs:
        assert out == f"{reused}\n"


def test_memory_reuse_keeps_the_use_of_tensors_from_other_streams(tmp_path, monkeypatch):
    monkeypatch.setenv("MULTI_STREAM_MEMORY_REUSE", "1")
    outputs = run_ranks(tmp_path, """
        dist.all_reduce(torch.ones(1).npu())
        torch.npu.synchronize()
        side = torch.npu.Stream()
        with torch.npu.stream(side):
            t = torch.full((1 << 20,), 1.0, device="npu")  # allocated on `side`
        side.synchronize()
        ptr = t.data_ptr()
        torch.npu._sleep(200 * torch.npu._cycles_per_ms())
        work = dist.all_reduce(t, async_op=True)
        work.wait()  # orders the current stream, not `side`
        del t, work
        with torch.npu.stream(side):
            u = torch.empty(1 << 20, device="npu")
        print(u.data_ptr() == ptr)
        torch.npu.synchronize()
        dist.destroy_process_group()
    """)
    for out in outputs:
        assert out == "False\n"


def test_bad_multi_stream_memory_reuse_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("MULTI_STREAM_MEMORY_REUSE", "5")
    init = 'dist.init_process_group("hccl", init_method=f"file://{sys.argv[3]}", rank=rank, world_size=world)\n'
    assert init in PRELUDE
    prelude = PRELUDE.replace(init, f"try:\n    {init}except Exception as e:\n    print(type(e).__name__, e)\n")
    outputs = run_ranks(tmp_path, "", world=1, prelude=prelude)
    assert "MULTI_STREAM_MEMORY_REUSE='5' is not valid" in outputs[0], outputs[0]
    assert "use 0" in outputs[0]


SPAWNED_RANKS = """\
import os, sys, warnings
import torch, torch_npu
import torch.distributed as dist
import torch.multiprocessing as mp

def rank_main(rank, world, store, results):
    warnings.filterwarnings("ignore", category=FutureWarning)
    torch.npu.set_device(rank)
    before = torch.arange(1 << 20, dtype=torch.float32).npu() + rank  # allocated before joining
    dist.init_process_group("hccl", init_method=f"file://{store}", rank=rank, world_size=world)
    dist.all_reduce(before)
    expected = 2 * torch.arange(1 << 20, dtype=torch.float32) + 1
    # The peer's device memory (a memfd named after its device) mapped
    # shared here, writable: the mapped transport (Note [Direct
    # collectives], Note [All-reduce writes every rank's share]).
    peer = f"memfd:npu_sim:device{1 - rank} "
    with open("/proc/self/maps") as maps:
        mapped = any(peer in line and " rw-s " in line for line in maps)
    # One file per rank: the ranks share stdout, and unbuffered prints of
    # two processes interleave.
    with open(f"{results}.{rank}", "w") as out:
        out.write(f"{rank} {torch.equal(before.cpu(), expected)} {mapped}")
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(rank_main, args=(2, sys.argv[1], sys.argv[2]), nprocs=2)
"""


@pytest.mark.parametrize("heap,mapped", [(None, True), ("private", False)])
def test_spawned_ranks_read_each_other_through_mappings(tmp_path, heap, mapped):
    # torch.multiprocessing.spawn sets no WORLD_SIZE, so the ranks' heaps
    # start private; joining the communicator makes them shared (Note
    # [Device heap kind]) unless NPU_SIM_DEVICE_HEAP says private. Without
    # the checker, which would make every heap shared from the start.
    script = tmp_path / "spawn.py"
    script.write_text(SPAWNED_RANKS)
    env = {k: v for k, v in os.environ.items()
           if k not in ("NPU_SIM_CHECKER", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NPU_SIM_DEVICE_HEAP")}
    if heap is not None:
        env["NPU_SIM_DEVICE_HEAP"] = heap
    results = tmp_path / "result"
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "store"), str(results)], env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert [(tmp_path / f"result.{r}").read_text() for r in range(2)] == [f"{r} True {mapped}" for r in range(2)]
