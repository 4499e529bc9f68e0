"""ProcessGroupHCCL: all_to_all, send/recv, batch_isend_irecv, gather and scatter.

One Python process per rank (test_process_group_hccl.run_ranks); the ranks
compute the expected values themselves and print what the test compares.
World 3 catches what world 2 hides (uneven splits, a ring that is not a
pair).
"""

from __future__ import annotations

import pytest
from test_process_group_hccl import PRELUDE, run_ranks

# Every dtype the collectives carry; `make(values)` builds a tensor of it
# from a list of small non-negative integers.
DTYPES = """
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64]

def make(values, dtype):
    t = torch.tensor(values, dtype=torch.int64)
    if dtype == torch.bool:
        return (t % 2).bool()
    if dtype.is_complex:
        return torch.complex(t.float(), -t.float()).to(dtype)
    return (t % 100).to(dtype)

def check(name, got, expected):
    got = got.cpu()
    assert got.dtype == expected.dtype and torch.equal(got, expected), (name, got, expected)
"""


@pytest.mark.parametrize("world", [2, 3])
def test_all_to_all_single_even_and_uneven_every_dtype(tmp_path, world):
    outputs = run_ranks(tmp_path, """
        for dtype in DTYPES:
            # Even: rank r sends rows [2d, 2d + 2) of its input to rank d.
            x = make([100 * rank + i for i in range(2 * world * 3)], dtype).reshape(2 * world, 3)
            out = torch.empty_like(x).npu()
            dist.all_to_all_single(out, x.npu())
            expected = torch.cat([make([100 * s + i for i in range(6 * rank, 6 * rank + 6)],
                                       dtype).reshape(2, 3) for s in range(world)])
            check(f"even {dtype}", out, expected)

            # Uneven: rank s sends s + d + 1 rows to rank d; row values name
            # the sender, the receiver and the row.
            def rows(s, d):
                return make([1000 * s + 100 * d + i for i in range(s + d + 1)], dtype)
            send = torch.cat([rows(rank, d) for d in range(world)])
            in_splits = [rank + d + 1 for d in range(world)]
            out_splits = [s + rank + 1 for s in range(world)]
            out = torch.empty(sum(out_splits), dtype=dtype).npu()
            dist.all_to_all_single(out, send.npu(), out_splits, in_splits)
            check(f"uneven {dtype}", out, torch.cat([rows(s, rank) for s in range(world)]))
        print("ok")
        dist.destroy_process_group()
    """, world=world, prelude=PRELUDE + DTYPES)
    assert outputs == ["ok\n"] * world


@pytest.mark.parametrize("world", [2, 3])
def test_all_to_all_lists_send_recv_gather_scatter(tmp_path, world):
    outputs = run_ranks(tmp_path, """
        right, left = (rank + 1) % world, (rank - 1) % world
        for dtype in DTYPES:
            # all_to_all of lists: rank s sends rank d a (s + 1) x (d + 2) tensor.
            def piece(s, d):
                return make([10 * s + d + i for i in range((s + 1) * (d + 2))],
                            dtype).reshape(s + 1, d + 2)
            outs = [torch.empty((s + 1, rank + 2), dtype=dtype).npu() for s in range(world)]
            dist.all_to_all(outs, [piece(rank, d).npu() for d in range(world)])
            for s in range(world):
                check(f"all_to_all {dtype} from {s}", outs[s], piece(s, rank))

            # send/recv around the ring: rank 0 sends first, the others receive first.
            mine = make([rank * 7 + i for i in range(5)], dtype).npu()
            got = torch.empty(5, dtype=dtype).npu()
            if rank == 0:
                dist.send(mine, dst=right)
                dist.recv(got, src=left)
            else:
                dist.recv(got, src=left)
                dist.send(mine, dst=right)
            check(f"ring {dtype}", got, make([left * 7 + i for i in range(5)], dtype))

            # batch_isend_irecv: every rank sends to both neighbours first.
            from_left = torch.empty(3, dtype=dtype).npu()
            from_right = torch.empty(4, dtype=dtype).npu()
            ops = [dist.P2POp(dist.isend, make([rank] * 3, dtype).npu(), right),
                   dist.P2POp(dist.isend, make([rank + 1] * 4, dtype).npu(), left),
                   dist.P2POp(dist.irecv, from_left, left),
                   dist.P2POp(dist.irecv, from_right, right)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
            check(f"batch from left {dtype}", from_left, make([left] * 3, dtype))
            check(f"batch from right {dtype}", from_right, make([right + 1] * 4, dtype))

            # gather to the last rank, scatter from rank 1.
            root = world - 1
            parts = [torch.empty((2, 2), dtype=dtype).npu() for _ in range(world)]
            dist.gather(make([rank, rank + 1, rank + 2, rank + 3], dtype).reshape(2, 2).npu(),
                        parts if rank == root else None, dst=root)
            if rank == root:
                for s in range(world):
                    check(f"gather {dtype} from {s}", parts[s],
                          make([s, s + 1, s + 2, s + 3], dtype).reshape(2, 2))
            out = torch.empty(3, dtype=dtype).npu()
            sources = [make([20 * d + i for i in range(3)], dtype).npu() for d in range(world)]
            dist.scatter(out, sources if rank == 1 else None, src=1)
            check(f"scatter {dtype}", out, make([20 * rank + i for i in range(3)], dtype))
        # Asynchronous point-to-point: the receiver's stream waits for the data.
        if rank < 2:
            t = torch.full((1000,), float(rank + 1)).npu()
            work = (dist.isend(t, dst=1) if rank == 0 else dist.irecv(t, src=0))
            work.wait()
            print("async", (t * 2).sum().item())
        print("ok")
        dist.destroy_process_group()
    """, world=world, prelude=PRELUDE + DTYPES)
    for rank, out in enumerate(outputs):
        expected = (["async 2000.0"] if rank < 2 else []) + ["ok"]
        assert out.splitlines() == expected, out


def test_bad_input_fails_clearly_without_hanging(tmp_path):
    outputs = run_ranks(tmp_path, """
        x = torch.arange(6.0).npu()
        # Refused on the host, before anything runs.
        print(error_after_sync(lambda: dist.all_to_all_single(torch.empty(6).npu(), x, [3, 3], [2, 2])))
        print(error_after_sync(lambda: dist.all_to_all_single(torch.empty(6).npu(), x, [3, 3], [6])))
        print(error_after_sync(lambda: dist.all_to_all_single(torch.empty(5).npu(), torch.arange(5.0).npu())))
        print(error_after_sync(lambda: dist.recv(torch.empty(2).npu())))
        print(error_after_sync(lambda: dist.send(torch.ones(2).npu(), dst=7)))
        # The backend's own check, for callers that bypass torch.distributed's.
        group = dist.distributed_c10d._get_default_group()
        print(error_after_sync(lambda: group.send([torch.ones(2).npu()], 7, 0).wait()))
        # The group still works after refused calls.
        t = torch.ones(2).npu()
        dist.all_reduce(t)
        print(t.tolist())
        # Ranks that disagree on the split sizes: every rank fails, naming both
        # sides, instead of moving wrong data.
        out_splits = [3, 3] if rank == 0 else [2, 4]
        print(error_after_sync(lambda: dist.all_to_all_single(torch.empty(6).npu(), x, out_splits,
                                                      [3, 3])).splitlines()[0])
        dist.destroy_process_group()
    """)
    for rank, out in enumerate(outputs):
        sums, count, uneven, anysource, torch_peer, peer, after, mismatch = out.splitlines()
        assert "input split sizes add up to 4, but its dim 0 is 6" in sums, sums
        assert "split sizes must have one entry per rank (2), got 1" in count, count
        assert "dim 0 (5) is not divisible by 2" in uneven, uneven
        assert "cannot receive from any source" in anysource and "src=" in anysource, anysource
        for refused in (torch_peer, peer):
            assert "send destination 7 is not a rank of this group of 2 ranks" in refused, refused
        assert after == "[2.0, 2.0]"
        assert "HcclAlltoAllV failed on rank" in mismatch, mismatch
        assert "rank 0 sends 3 elements to rank 1, but rank 1 expects 2 from rank 0" in mismatch


def test_a_receive_of_another_size_fails_both_ranks(tmp_path):
    outputs = run_ranks(tmp_path, """
        try:
            if rank == 0:
                dist.send(torch.ones(4).npu(), dst=1)
            else:
                dist.recv(torch.empty(3).npu(), src=0)
            torch.npu.synchronize()
            print("no error")
        except Exception as e:
            print(str(e).splitlines()[0])
        os._exit(0)  # the communicator has failed; nothing to tear down
    """)
    sender, receiver = (out.strip() for out in outputs)
    assert "HcclRecv failed on rank 1 of 2" in receiver, receiver
    assert "rank 0 sends 4 elements of HCCL_DATA_TYPE_FP32, but rank 1 receives 3" in receiver
    assert "HcclSend failed on rank 0 of 2" in sender and "rank 1 of the communicator failed" in sender


@pytest.mark.parametrize("world", [2, 3])
def test_uneven_all_gather_and_reduce_scatter(tmp_path, world):
    outputs = run_ranks(tmp_path, """
        from torch_npu.distributed import (all_gather_into_tensor_uneven,
                                           reduce_scatter_tensor_uneven)
        splits = [s + 1 for s in range(world)]  # rank s owns s + 1 rows
        for dtype in DTYPES:
            mine = make([10 * rank + i for i in range(2 * splits[rank])], dtype).reshape(-1, 2)
            out = torch.empty((sum(splits), 2), dtype=dtype).npu()
            assert all_gather_into_tensor_uneven(out, mine.npu(), splits) is None
            expected = torch.cat([make([10 * s + i for i in range(2 * splits[s])],
                                       dtype).reshape(-1, 2) for s in range(world)])
            check(f"all_gather uneven {dtype}", out, expected)
        for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.int8):
            for op, combine in [(dist.ReduceOp.SUM, sum), (dist.ReduceOp.MAX, max),
                                (dist.ReduceOp.MIN, min)]:
                # Rank r's input row i holds r + i + 1 (in both columns).
                def row_values(r):
                    return [r + i + 1 for i in range(sum(splits))]
                x = torch.tensor(row_values(rank), dtype=dtype).repeat_interleave(2).reshape(-1, 2)
                out = torch.empty((splits[rank], 2), dtype=dtype).npu()
                work = reduce_scatter_tensor_uneven(out, x.npu(), splits, op=op, async_op=True)
                work.wait()
                start = sum(splits[:rank])
                reduced = [combine(row_values(r)[i] for r in range(world))
                           for i in range(start, start + splits[rank])]
                expected = torch.tensor(reduced, dtype=dtype).repeat_interleave(2).reshape(-1, 2)
                check(f"reduce_scatter uneven {dtype} {op}", out, expected)
        x = torch.arange(2.0 * world).npu() * (rank + 1)
        out = torch.empty(2).npu()
        reduce_scatter_tensor_uneven(out, x, op=dist.ReduceOp.AVG)  # even split
        check("reduce_scatter avg", out,
              torch.arange(2.0 * rank, 2.0 * rank + 2) * (world + 1) / 2)
        print("ok")
        dist.destroy_process_group()
    """, world=world, prelude=PRELUDE + DTYPES)
    assert outputs == ["ok\n"] * world


def test_uneven_collectives_refuse_bad_splits(tmp_path):
    outputs = run_ranks(tmp_path, """
        from torch_npu.distributed import (all_gather_into_tensor_uneven,
                                           reduce_scatter_tensor_uneven)
        print(error_after_sync(lambda: all_gather_into_tensor_uneven(
            torch.empty(5).npu(), torch.ones(2).npu(), [2, 2])))
        print(error_after_sync(lambda: all_gather_into_tensor_uneven(
            torch.empty(5).npu(), torch.ones(2).npu(), [2, 2, 1])))
        print(error_after_sync(lambda: all_gather_into_tensor_uneven(
            torch.empty(5).npu(), torch.ones(4).npu(), [2, 3] if rank == 0 else [4, 1])))
        print(error_after_sync(lambda: reduce_scatter_tensor_uneven(
            torch.empty(1).npu(), torch.ones(5).npu(), [3, 2])))
        # The ranks disagree: rank 0 thinks it owns 3 rows, rank 1 thinks 2.
        splits = [3, 2] if rank == 0 else [2, 3]
        print(error_after_sync(lambda: reduce_scatter_tensor_uneven(
            torch.empty(splits[rank]).npu(), torch.ones(5).npu(), splits)))
        os._exit(0)  # the communicator has failed; nothing to tear down
    """)
    for rank, out in enumerate(outputs):
        sums, count, rows, output, disagree = out.splitlines()
        assert "output split sizes add up to 4, but its dim 0 is 5" in sums, sums
        assert "must have one entry per rank (2), got 3" in count, count
        assert f"the input of rank {rank} must fill its rows of the output" in rows, rows
        assert (f"the output of rank {rank} must hold its rows of the input ({3 - rank} "
                "elements), got 1") in output, output
        assert "HcclAlltoAllV failed on rank" in disagree, disagree
        assert "rank 0 sends 2 elements to rank 1, but rank 1 expects 3 from rank 0" in disagree


@pytest.mark.parametrize("world", [2, 3])
def test_all_to_all_vc_follows_the_count_matrix(tmp_path, world):
    # torch_npu.distributed.all_to_all_vc: matrix[i][j] elements go from rank
    # i to rank j, every rank passing the whole matrix; the tensors are flat
    # pieces of any shape.
    outputs = run_ranks(tmp_path, """
        from torch_npu.distributed import all_to_all_vc
        matrix = [[(i + 2 * j) % 3 + (i == j) for j in range(world)] for i in range(world)]
        def piece(src, dst, dtype):  # what rank src sends to rank dst
            return torch.tensor([100 * src + 10 * dst + k for k in range(matrix[src][dst])], dtype=dtype)
        for dtype in (torch.float32, torch.int64, torch.bfloat16):
            send = torch.cat([piece(rank, dst, dtype) for dst in range(world)])
            expected = torch.cat([piece(src, rank, dtype) for src in range(world)])
            out = torch.full((expected.numel(),), -1, dtype=dtype).npu()
            assert all_to_all_vc(out, send.npu(), matrix) is None
            assert torch.equal(out.cpu(), expected), (dtype, out.cpu(), expected)
        # N-d tensors are taken as their elements in order; async_op gives the work.
        even = [[2] * world for _ in range(world)]
        send = torch.arange(2.0 * world).reshape(world, 2) + 10 * rank
        out = torch.empty(world, 2).npu()
        all_to_all_vc(out, send.npu(), even, async_op=True).wait()
        assert torch.equal(out.cpu(), torch.stack([torch.arange(2.0 * rank, 2.0 * rank + 2) + 10 * s
                                                   for s in range(world)]))
        print(error_of(lambda: all_to_all_vc(out, send.npu(), even[1:])))
        print(error_of(lambda: all_to_all_vc(out, torch.ones(3).npu(), even)))
        print(error_of(lambda: all_to_all_vc(out, send.npu().t(), even)))
        print(error_of(lambda: all_to_all_vc(out, send.npu(), [[-1] * world] * world)))
        dist.destroy_process_group()
    """, world=world)
    for rank, out in enumerate(outputs):
        shape, count, layout, negative = out.splitlines()
        assert shape.startswith("ValueError") and f"must be {world} x {world}" in shape, shape
        assert f"input has 3 elements, but row {rank} of send_count_matrix" in count, count
        assert "input must be a contiguous npu tensor, got a non-contiguous tensor" in layout, layout
        assert "non-negative integers" in negative, negative


def test_subgroups_and_coalescing(tmp_path):
    outputs = run_ranks(tmp_path, """
        # Point-to-point in a group of ranks 1 and 2: peers are global ranks,
        # the backend sees group ranks.
        pair = dist.new_group([1, 2], backend="hccl")
        if rank > 0:
            t = torch.full((3,), float(rank)).npu()
            dist.barrier(group=pair)  # the group's first operation involves both ranks
            if rank == 1:
                dist.send(t, dst=2, group=pair)
            else:
                dist.recv(t, src=1, group=pair)
            got = [torch.empty(3).npu() for _ in range(2)]
            dist.gather(t, got if rank == 2 else None, dst=2, group=pair)
            print("pair", t.tolist(), [g.tolist() for g in got] if rank == 2 else None)
        # Only send and recv can be coalesced; what else is called in the
        # block is refused instead of running out of order.
        device = torch.device("npu", rank)
        try:
            with dist._coalescing_manager(device=device):
                dist.broadcast(torch.ones(2).npu(), src=0)
        except Exception as e:
            print(type(e).__name__, "hccl coalesces only send and recv" in str(e))
        # The group still works: an empty coalescing block, then a batch.
        with dist._coalescing_manager(device=device, async_ops=True) as cm:
            pass
        cm.wait()
        t = torch.full((2,), float(rank)).npu()
        out = torch.empty(2).npu()
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, (rank + 1) % world),
                                        dist.P2POp(dist.irecv, out, (rank - 1) % world)])
        for w in works:
            w.wait()
        print(out.tolist())
        dist.destroy_process_group()
    """, world=3)
    assert outputs[0].splitlines()[-2:] == ["ValueError True", "[2.0, 2.0]"]
    assert outputs[1].splitlines() == ["pair [1.0, 1.0, 1.0] None", "ValueError True",
                                       "[0.0, 0.0]"]
    assert outputs[2].splitlines() == [
        "pair [1.0, 1.0, 1.0] [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]", "ValueError True", "[1.0, 1.0]"]
