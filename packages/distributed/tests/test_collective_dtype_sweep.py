"""Every collective of ProcessGroupHCCL x every dtype x every reduce op, 2 and 4 ranks.

Also the functional collectives (DTensor's and torch.compile's) for every
dtype, and the object collectives (pickled Python objects) once.

One launch of the ranks per world size runs the whole sweep: each rank
builds every rank's input (they are functions of the rank), computes on the
CPU what the collective must give, and compares; combinations HCCL cannot
reduce must be refused at the call with an error that names the reduce op
or the dtype. The ranks collect every wrong value instead of stopping at
the first, so one run reports all of them.
"""

from __future__ import annotations

import json

import pytest
from test_process_group_hccl import run_ranks

SWEEP = """
import functools, json
import torch.distributed._functional_collectives as funcol
import torch_npu.distributed as npu_dist

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8,
          torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64]
last = world - 1
device = f"npu:{rank}"
# PREMUL_SUM multiplies each rank's input by a factor (a number, or a
# one-element tensor on the device or the CPU), then sums.
FACTORS = {"PREMUL_SUM": 2.0, "PREMUL_SUM(npu tensor)": -3.0, "PREMUL_SUM(cpu tensor)": 0.5}
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG,
       "PREMUL_SUM": dist._make_nccl_premul_sum(FACTORS["PREMUL_SUM"]),
       "PREMUL_SUM(npu tensor)": dist._make_nccl_premul_sum(
           torch.tensor([FACTORS["PREMUL_SUM(npu tensor)"]], device=device)),
       "PREMUL_SUM(cpu tensor)": dist._make_nccl_premul_sum(
           torch.tensor([FACTORS["PREMUL_SUM(cpu tensor)"]])),
       "BAND": dist.ReduceOp.BAND, "BOR": dist.ReduceOp.BOR, "BXOR": dist.ReduceOp.BXOR}
N = 13  # elements per piece: odd, so nothing lines up by accident
stats = {"checked": 0, "refused": 0}
failures = []


def make(ints, dtype):
    t = torch.tensor(ints, dtype=torch.int64)
    if dtype == torch.bool:
        return t % 2 == 1
    if dtype == torch.uint8:
        t = t.abs()
    if dtype.is_complex:
        return torch.complex(t.float(), -2 * t.float()).to(dtype)
    return t.to(dtype)


def piece(s, dtype, seed, op_name="SUM", n=N):
    # Rank s's values. Sums of 4 stay within int8 (-40..76), products of 4
    # within 81, so every dtype holds every result exactly.
    if op_name == "PRODUCT":
        ints = [((i + s + seed) % 5 - 2) or 3 for i in range(n)]
    else:
        ints = [(7 * i + 3 * s + 11 * seed) % 30 - 10 for i in range(n)]
    return make(ints, dtype)


def reduced(tensors, op_name):
    # What HCCL must give: the ranks' values combined in rank order.
    if op_name == "AVG":
        return functools.reduce(torch.add, tensors) / world
    if op_name in FACTORS:
        return functools.reduce(torch.add, [t * FACTORS[op_name] for t in tensors])
    fn = {"SUM": torch.add, "PRODUCT": torch.mul, "MIN": torch.minimum, "MAX": torch.maximum}
    return functools.reduce(fn[op_name], tensors)


def refusal(dtype, op_name):
    # Parts of the error that refuses op on dtype (any one will do), or None
    # when the combination must work. torch's all_reduce refuses complex
    # tensors with most ops itself, before the backend sees them.
    if op_name in ("BAND", "BOR", "BXOR"):
        return (f"ReduceOp.{op_name}", f"RedOpType.{op_name} on complex tensors")
    if dtype.is_complex and op_name in ("PRODUCT", "MIN", "MAX"):
        return (f"RedOpType.{op_name} on complex tensors",
                "complex tensors can only be reduced by SUM, AVG or PREMUL_SUM")
    if op_name in FACTORS and not (dtype.is_floating_point or dtype.is_complex):
        return ("ReduceOp.PREMUL_SUM needs a floating-point or complex tensor",)
    if op_name == "AVG" and not (dtype.is_floating_point or dtype.is_complex):
        return ("ReduceOp.AVG needs a floating-point or complex tensor",)
    return None


def check(name, got, expected):
    stats["checked"] += 1
    got = got.cpu()
    if got.dtype != expected.dtype or not torch.equal(got, expected):
        failures.append(f"{name}: got {got.tolist()} expected {expected.tolist()}")


def run(name, fn, dtype, op_name="SUM"):
    # Runs one collective (fn does the call and its checks), or checks that
    # the combination is refused at the call.
    expected_error = refusal(dtype, op_name)
    try:
        fn()
        torch.npu.synchronize()
    except Exception as e:
        message = str(e).splitlines()[0]
        if expected_error is None:
            failures.append(f"{name}: unexpected {type(e).__name__}: {message}")
        elif (not any(part in message for part in expected_error)
              or not isinstance(e, (ValueError, TypeError))):
            failures.append(f"{name}: refused with {type(e).__name__}: {message}")
        else:
            stats["refused"] += 1
        return
    if expected_error is not None:
        failures.append(f"{name}: not refused (expected an error with {expected_error!r})")


for dtype in DTYPES:
    for op_name, op in OPS.items():
        tag = f"{dtype} {op_name}"
        def all_reduce():
            t = piece(rank, dtype, 0, op_name).to(device)
            dist.all_reduce(t, op=op)
            check(f"all_reduce {tag}", t, reduced([piece(s, dtype, 0, op_name)
                                                   for s in range(world)], op_name))
        run(f"all_reduce {tag}", all_reduce, dtype, op_name)

        def all_reduce_coalesced():
            ts = [piece(rank, dtype, 1, op_name).to(device), piece(rank, dtype, 2, op_name, 5).to(device)]
            dist.all_reduce_coalesced(ts, op=op)
            for i, (seed, n) in enumerate([(1, N), (2, 5)]):
                check(f"all_reduce_coalesced[{i}] {tag}", ts[i],
                      reduced([piece(s, dtype, seed, op_name, n) for s in range(world)], op_name))
        run(f"all_reduce_coalesced {tag}", all_reduce_coalesced, dtype, op_name)

        def reduce():
            t = piece(rank, dtype, 3, op_name).to(device)
            dist.reduce(t, dst=last, op=op)
            if rank == last:  # only the destination's tensor is defined
                check(f"reduce {tag}", t, reduced([piece(s, dtype, 3, op_name)
                                                   for s in range(world)], op_name))
        run(f"reduce {tag}", reduce, dtype, op_name)

        def reduce_scatter():
            out = torch.empty(N, dtype=dtype, device=device)
            dist.reduce_scatter(out, [piece(rank, dtype, 10 + d, op_name).to(device)
                                      for d in range(world)], op=op)
            check(f"reduce_scatter {tag}", out,
                  reduced([piece(s, dtype, 10 + rank, op_name) for s in range(world)], op_name))
        run(f"reduce_scatter {tag}", reduce_scatter, dtype, op_name)

        def reduce_scatter_tensor():
            out = torch.empty(N, dtype=dtype, device=device)
            dist.reduce_scatter_tensor(out, torch.cat([piece(rank, dtype, 20 + d, op_name)
                                                       for d in range(world)]).to(device), op=op)
            check(f"reduce_scatter_tensor {tag}", out,
                  reduced([piece(s, dtype, 20 + rank, op_name) for s in range(world)], op_name))
        run(f"reduce_scatter_tensor {tag}", reduce_scatter_tensor, dtype, op_name)

        def reduce_scatter_tensor_coalesced():
            outs = [torch.empty(n, dtype=dtype, device=device) for n in (N, 3)]
            ins = [torch.cat([piece(rank, dtype, 30 + 10 * i + d, op_name, n) for d in range(world)])
                   for i, n in enumerate((N, 3))]
            with dist._coalescing_manager(async_ops=False):
                for o, x in zip(outs, ins):
                    dist.reduce_scatter_tensor(o, x.to(device), op=op)
            for i, n in enumerate((N, 3)):
                check(f"reduce_scatter_tensor coalesced[{i}] {tag}", outs[i],
                      reduced([piece(s, dtype, 30 + 10 * i + rank, op_name, n)
                               for s in range(world)], op_name))
        run(f"reduce_scatter_tensor coalesced {tag}", reduce_scatter_tensor_coalesced, dtype,
            op_name)

        def reduce_scatter_tensor_uneven():
            # Rank d gets d + 1 rows of 2.
            splits = [d + 1 for d in range(world)]
            rows = lambda s, d: piece(s, dtype, 50 + d, op_name, 2 * (d + 1)).reshape(d + 1, 2)
            out = torch.empty(rank + 1, 2, dtype=dtype, device=device)
            npu_dist.reduce_scatter_tensor_uneven(
                out, torch.cat([rows(rank, d) for d in range(world)]).to(device), splits, op=op)
            check(f"reduce_scatter_tensor_uneven {tag}", out,
                  reduced([rows(s, rank) for s in range(world)], op_name))
        run(f"reduce_scatter_tensor_uneven {tag}", reduce_scatter_tensor_uneven, dtype, op_name)

    def funcol_reductions():
        for op_name in ("SUM", "AVG", "MIN", "MAX", "PRODUCT"):
            if refusal(dtype, op_name):
                continue
            t = piece(rank, dtype, 60, op_name).to(device)
            got = funcol.all_reduce(t, op_name.lower(), dist.group.WORLD).wait()
            check(f"funcol.all_reduce {dtype} {op_name}", got,
                  reduced([piece(s, dtype, 60, op_name) for s in range(world)], op_name))
            x = torch.cat([piece(rank, dtype, 70 + d, op_name) for d in range(world)]).to(device)
            got = funcol.reduce_scatter_tensor(x, op_name.lower(), 0, dist.group.WORLD).wait()
            check(f"funcol.reduce_scatter_tensor {dtype} {op_name}", got,
                  reduced([piece(s, dtype, 70 + rank, op_name) for s in range(world)], op_name))
    run(f"funcol reductions {dtype}", funcol_reductions, dtype)

    def broadcast():
        for src in (0, last):
            t = piece(rank, dtype, 80 + src).to(device)
            dist.broadcast(t, src=src)
            check(f"broadcast {dtype} src={src}", t, piece(src, dtype, 80 + src))
    run(f"broadcast {dtype}", broadcast, dtype)

    def all_gathers():
        everyone = torch.stack([piece(s, dtype, 90) for s in range(world)])
        parts = [torch.empty(N, dtype=dtype, device=device) for _ in range(world)]
        dist.all_gather(parts, piece(rank, dtype, 90).to(device))
        check(f"all_gather {dtype}", torch.stack([p.cpu() for p in parts]), everyone)
        flat = torch.empty(world * N, dtype=dtype, device=device)
        dist.all_gather_into_tensor(flat, piece(rank, dtype, 90).to(device))
        check(f"all_gather_into_tensor {dtype}", flat, everyone.flatten())
        outs = [torch.empty(world * n, dtype=dtype, device=device) for n in (N, 4)]
        with dist._coalescing_manager(async_ops=False):
            for i, (o, n) in enumerate(zip(outs, (N, 4))):
                dist.all_gather_into_tensor(o, piece(rank, dtype, 91 + i, n=n).to(device))
        for i, n in enumerate((N, 4)):
            check(f"all_gather_into_tensor coalesced[{i}] {dtype}", outs[i],
                  torch.cat([piece(s, dtype, 91 + i, n=n) for s in range(world)]))
        # Uneven: rank s has s + 1 rows of 3.
        rows = lambda s: piece(s, dtype, 95, n=3 * (s + 1)).reshape(s + 1, 3)
        out = torch.empty(sum(s + 1 for s in range(world)), 3, dtype=dtype, device=device)
        npu_dist.all_gather_into_tensor_uneven(out, rows(rank).to(device),
                                               [s + 1 for s in range(world)])
        check(f"all_gather_into_tensor_uneven {dtype}", out, torch.cat([rows(s) for s in range(world)]))
        got = funcol.all_gather_tensor(piece(rank, dtype, 96).to(device), 0, dist.group.WORLD).wait()
        check(f"funcol.all_gather_tensor {dtype}", got,
              torch.cat([piece(s, dtype, 96) for s in range(world)]))
    run(f"all_gathers {dtype}", all_gathers, dtype)

    def all_to_alls():
        # Rank s sends rank d the piece piece(s, seed=100 + d), of s + d + 1 elements when uneven.
        even = torch.empty(world * N, dtype=dtype, device=device)
        dist.all_to_all_single(even, torch.cat([piece(rank, dtype, 100 + d)
                                                for d in range(world)]).to(device))
        check(f"all_to_all_single even {dtype}", even,
              torch.cat([piece(s, dtype, 100 + rank) for s in range(world)]))
        sizes = lambda s, d: s + d + 1
        out_splits = [sizes(s, rank) for s in range(world)]
        uneven = torch.empty(sum(out_splits), dtype=dtype, device=device)
        dist.all_to_all_single(uneven, torch.cat([piece(rank, dtype, 110 + d, n=sizes(rank, d))
                                                  for d in range(world)]).to(device),
                               out_splits, [sizes(rank, d) for d in range(world)])
        check(f"all_to_all_single uneven {dtype}", uneven,
              torch.cat([piece(s, dtype, 110 + rank, n=sizes(s, rank)) for s in range(world)]))
        outs = [torch.empty(sizes(s, rank), dtype=dtype, device=device) for s in range(world)]
        dist.all_to_all(outs, [piece(rank, dtype, 120 + d, n=sizes(rank, d)).to(device)
                               for d in range(world)])
        check(f"all_to_all {dtype}", torch.cat([o.cpu() for o in outs]),
              torch.cat([piece(s, dtype, 120 + rank, n=sizes(s, rank)) for s in range(world)]))
        got = funcol.all_to_all_single(torch.cat([piece(rank, dtype, 130 + d, n=sizes(rank, d))
                                                  for d in range(world)]).to(device),
                                       out_splits, [sizes(rank, d) for d in range(world)],
                                       dist.group.WORLD).wait()
        check(f"funcol.all_to_all_single {dtype}", got,
              torch.cat([piece(s, dtype, 130 + rank, n=sizes(s, rank)) for s in range(world)]))
    run(f"all_to_alls {dtype}", all_to_alls, dtype)

    def gather_scatter():
        parts = [torch.empty(N, dtype=dtype, device=device) for _ in range(world)] if rank == last else None
        dist.gather(piece(rank, dtype, 140).to(device), parts, dst=last)
        if rank == last:
            check(f"gather {dtype}", torch.stack([p.cpu() for p in parts]),
                  torch.stack([piece(s, dtype, 140) for s in range(world)]))
        out = torch.empty(N, dtype=dtype, device=device)
        pieces = [piece(last, dtype, 150 + d).to(device) for d in range(world)] if rank == 0 else None
        dist.scatter(out, pieces, src=0)
        check(f"scatter {dtype}", out, piece(last, dtype, 150 + rank))
    run(f"gather/scatter {dtype}", gather_scatter, dtype)

    def point_to_point():
        right, left = (rank + 1) % world, (rank - 1) % world
        got = torch.empty(N, dtype=dtype, device=device)
        ops = [dist.P2POp(dist.isend, piece(rank, dtype, 160).to(device), right),
               dist.P2POp(dist.irecv, got, left)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        check(f"batch_isend_irecv {dtype}", got, piece(left, dtype, 160))
        # Blocking send/recv between pairs (0, 1), (2, 3): the even rank sends first.
        peer = rank ^ 1
        got = torch.empty(N, dtype=dtype, device=device)
        if rank % 2 == 0:
            dist.send(piece(rank, dtype, 170).to(device), dst=peer)
            dist.recv(got, src=peer)
        else:
            dist.recv(got, src=peer)
            dist.send(piece(rank, dtype, 170).to(device), dst=peer)
        check(f"send/recv {dtype}", got, piece(peer, dtype, 170))
    run(f"point-to-point {dtype}", point_to_point, dtype)

def object_collectives():
    # Pickled Python objects, carried by the hccl group through npu tensors.
    def check_object(name, got, expected):
        stats["checked"] += 1
        if got != expected:
            failures.append(f"{name}: got {got!r} expected {expected!r}")
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "name": f"r{rank}"})
    check_object("all_gather_object", gathered,
                 [{"rank": s, "name": f"r{s}"} for s in range(world)])
    objects = [rank, "from", rank] if rank == last else [None] * 3
    dist.broadcast_object_list(objects, src=last)
    check_object("broadcast_object_list", objects, [last, "from", last])
    gathered = [None] * world if rank == last else None
    dist.gather_object((rank, "g"), gathered, dst=last)
    if rank == last:
        check_object("gather_object", gathered, [(s, "g") for s in range(world)])
    mine = [None]
    dist.scatter_object_list(mine, [("s", d) for d in range(world)] if rank == 0 else None, src=0)
    check_object("scatter_object_list", mine, [("s", rank)])
run("object collectives", object_collectives, torch.float32)

dist.barrier()
print(json.dumps({"failures": failures, **stats}))
dist.destroy_process_group()
"""

N_DTYPES = 11
REDUCING_COLLECTIVES = 7  # all_reduce (and coalesced), reduce, the 4 reduce-scatters


@pytest.mark.parametrize("world", [2, 4])
def test_every_collective_every_dtype_every_reduce_op(tmp_path, world):
    outputs = run_ranks(tmp_path, SWEEP, world=world, timeout=300)
    reports = [json.loads(out.splitlines()[-1]) for out in outputs]
    for rank, report in enumerate(reports):
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"])
    # Every rank refused the same combinations in each reducing collective:
    # BAND, BOR and BXOR on every dtype; PRODUCT, MIN and MAX on complex; AVG
    # and the 3 PREMUL_SUMs on the 5 integer types and bool.
    refused_per_collective = N_DTYPES * 3 + 3 + 6 * 4
    assert [r["refused"] for r in reports] == [REDUCING_COLLECTIVES * refused_per_collective] * world
    # Every value checked: the (dtype, op) pairs that reduce (4 floating
    # types x 8 ops, 5 integer types and bool x 4, complex x 5) in 8 checks
    # of the reducing collectives; 2 checks of functional collectives per
    # (dtype, op) pair they have (PREMUL_SUM: no); per dtype 2 broadcasts,
    # 6 all-gathers, 4 all-to-alls, a scatter and 2 point-to-point; 3 object
    # collectives. The root of reduce and gather (and gather_object) checks
    # those too.
    reducing_pairs = 4 * 8 + 6 * 4 + 5
    functional_pairs = 4 * 5 + 6 * 4 + 2
    checked = reducing_pairs * 8 + functional_pairs * 2 + N_DTYPES * (2 + 6 + 4 + 1 + 2) + 3
    assert [r["checked"] for r in reports] == (
        [checked] * (world - 1) + [checked + reducing_pairs + N_DTYPES + 1])
