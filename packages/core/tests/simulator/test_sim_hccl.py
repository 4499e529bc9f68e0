"""The simulator's HCCL: collectives between processes, each with its own device.

Each test starts one Python process per rank against the library under test.
Rank 0 makes the root info and hands it to the others through a file (what
torch-npu's process group does through the c10d store).
"""

import array
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from _simlib import (
    HCCL_E_PARA,
    HCCL_FP32,
    HCCL_FP64,
    HCCL_INT8,
    HCCL_INT16,
    HCCL_INT32,
    HCCL_INT64,
    HCCL_UINT8,
    HCCL_UINT64,
)
from _simrunner import TESTS_DIR, Runner

# The name of the communicator a simulator root info names (its socket is
# "@" + that name in /proc/net/unix while ranks join: Note [Shared segments]).
SEGMENT_OF = """
def segment_of(root_bytes):
    return root_bytes[root_bytes.index(b"/npu-sim-hccl-") + 1:].split(b"\\0")[0].decode()
"""

# Joins the communicator; afterwards `comm`, `rank`, `world` and `stream`
# (the current device's default stream, None) are defined, and `join(tag)`
# makes another communicator of all ranks.
JOIN = """\
import array, struct
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD"])
if os.environ.get("HOSTS"):  # each rank's machine (Note [Socket transport]), comma-separated
    os.environ["NPU_SIM_HOST_ID"] = os.environ["HOSTS"].split(",")[rank]
""" + SEGMENT_OF + """
sim.set_device(rank)

def join(tag="", config=None):
    root = ctypes.create_string_buffer(HCCL_ROOT_INFO_BYTES)
    root_file = os.environ["ROOT_FILE"] + tag
    if rank == 0 and not os.environ.get("ROOT_GIVEN"):  # ROOT_GIVEN: reuse the file's
        assert lib.HcclGetRootInfo(root) == HCCL_SUCCESS
        with open(root_file + ".tmp", "wb") as f:
            f.write(root.raw)
        os.rename(root_file + ".tmp", root_file)
    else:
        deadline = time.time() + 30
        while not os.path.exists(root_file):
            assert time.time() < deadline, "rank 0 never published the root info"
            time.sleep(0.01)
        root.raw = open(root_file, "rb").read()
    global segment  # the communicator's name (Note [Shared segments])
    segment = segment_of(root.raw)
    comm = ctypes.c_void_p()
    n = int(os.environ.get("NRANKS", world))
    if config is None:
        rc = lib.HcclCommInitRootInfo(n, root, rank, ctypes.byref(comm))
    else:
        rc = lib.HcclCommInitRootInfoConfig(n, root, rank, config, ctypes.byref(comm))
    assert rc == HCCL_SUCCESS, (rc, sim.err())
    return comm

comm = join()
stream = None

def upload(values, code):
    data = array.array(code, values).tobytes()
    p = sim.malloc(max(len(data), 1))
    sim.h2d(p, data, sync=True)
    return p

def download(p, n, code):
    out = array.array(code)
    out.frombytes(sim.d2h(p, n * out.itemsize, sync=True).raw)
    return out.tolist()

def ok(rc):
    assert rc == HCCL_SUCCESS, (rc, sim.err())
"""


def run_ranks(runner, tmp_path, body, world=2, timeout=60, before_join="", **env):
    """Runs `body` in `world` processes at once; returns their results by rank.
    `before_join` runs before the ranks join the communicator."""
    code = (Runner.PRELUDE.format(tests=str(TESTS_DIR)) + textwrap.dedent(before_join) + JOIN
            + textwrap.dedent(body))
    procs = []
    for rank in range(world):
        rank_env = runner.env(RANK=rank, WORLD=world, ROOT_FILE=tmp_path / "root", **env)
        procs.append(subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=rank_env))
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def all_ok(results):
    for rank, r in enumerate(results):
        assert r.returncode == 0, f"rank {rank}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return [r.stdout for r in results]


# (HCCL data type, array code, each rank's values) for the all-reduce test.
ALL_REDUCE_CASES = [
    (HCCL_FP32, "f", [[r + 0.5, -r, 2.0 ** r] for r in range(3)]),
    (HCCL_FP64, "d", [[r / 3, 1e300 * (r - 1), 7.0] for r in range(3)]),
    (HCCL_INT8, "b", [[r, -r, 3] for r in range(3)]),
    (HCCL_UINT8, "B", [[r, 200, 1] for r in range(3)]),
    (HCCL_INT16, "h", [[r * 1000, -7, 2] for r in range(3)]),
    (HCCL_INT32, "i", [[r, -(10 ** 9), 5] for r in range(3)]),
    (HCCL_INT64, "q", [[r, 2 ** 40, -3] for r in range(3)]),
    (HCCL_UINT64, "Q", [[r, 2 ** 63, 9] for r in range(3)]),
]


def test_all_reduce_every_op_and_type_on_three_ranks(runner, tmp_path):
    outs = all_ok(run_ranks(runner, tmp_path, """
        for dtype, code, values in CASES:
            for op in (HCCL_SUM, HCCL_PROD, HCCL_MAX, HCCL_MIN):
                p = upload(values[rank], code)
                ok(lib.HcclAllReduce(p, p, 3, dtype, op, comm, stream))
                sim.sync()
                print(dtype, op, download(p, 3, code))
    """.replace("CASES", repr(ALL_REDUCE_CASES)), world=3))
    assert outs[0] == outs[1] == outs[2]  # every rank gets the same bits
    lines = iter(outs[0].splitlines())
    wrap = {"b": 2 ** 8, "B": 2 ** 8, "h": 2 ** 16, "i": 2 ** 32, "q": 2 ** 64, "Q": 2 ** 64}
    for dtype, code, values in ALL_REDUCE_CASES:
        columns = list(zip(*values))
        for op, combine in [(0, sum), (1, lambda c: c[0] * c[1] * c[2]), (2, max), (3, min)]:
            expected = [combine(c) for c in columns]
            if code in wrap:  # integer arithmetic wraps around, as on the device
                m = wrap[code]
                signed = code.islower()
                expected = [((e % m) - m if signed and e % m >= m // 2 else e % m) for e in expected]
            else:  # in the element type, in rank order
                expected = []
                for c in columns:
                    a = array.array(code, [c[0]])
                    for x in c[1:]:
                        a[0] = {0: a[0] + x, 1: a[0] * x, 2: max(a[0], x), 3: min(a[0], x)}[op]
                    expected.append(a[0])
            assert next(lines) == f"{dtype} {op} {expected}"


def test_half_and_bfloat16_sums(runner, tmp_path):
    outs = all_ok(run_ranks(runner, tmp_path, """
        half = [struct.unpack("<e", struct.pack("<e", v))[0] for v in (1.5, -2.25, 1024.0)]
        p = sim.malloc(6)
        sim.h2d(p, struct.pack("<3e", *[v * (rank + 1) for v in half]), sync=True)
        ok(lib.HcclAllReduce(p, p, 3, HCCL_FP16, HCCL_SUM, comm, stream))
        sim.sync()
        print(list(struct.unpack("<3e", sim.d2h(p, 6, sync=True).raw)))
        # bfloat16: the top halves of float32s
        bf = [struct.pack("<f", v * (rank + 1))[2:] for v in (0.5, 3.0, -96.0)]
        q = sim.malloc(6)
        sim.h2d(q, b"".join(bf), sync=True)
        ok(lib.HcclAllReduce(q, q, 3, HCCL_BFP16, HCCL_SUM, comm, stream))
        sim.sync()
        raw = sim.d2h(q, 6, sync=True).raw
        print([struct.unpack("<f", b"\\0\\0" + raw[i:i + 2])[0] for i in (0, 2, 4)])
    """))
    assert outs[0] == outs[1]
    half, bf16 = outs[0].splitlines()
    assert half == str([4.5, -6.75, 3072.0])
    assert bf16 == str([1.5, 9.0, -288.0])


def test_broadcast_reduce_gather_scatter_barrier(runner, tmp_path):
    outs = all_ok(run_ranks(runner, tmp_path, """
        b = upload([rank * 10 + i for i in range(4)], "i")
        ok(lib.HcclBroadcast(b, 4, HCCL_INT32, 2, comm, stream))
        send = upload([rank + 1] * 3, "q")
        recv = upload([-1] * 3, "q")
        ok(lib.HcclReduce(send, recv, 3, HCCL_INT64, HCCL_SUM, 1, comm, stream))
        g_in = upload([rank, rank * 100], "f")
        g_out = upload([0] * 2 * world, "f")
        ok(lib.HcclAllGather(g_in, g_out, 2, HCCL_FP32, comm, stream))
        rs_in = upload([rank + 10 * j for j in range(2 * world)], "d")
        rs_out = upload([0, 0], "d")
        ok(lib.HcclReduceScatter(rs_in, rs_out, 2, HCCL_FP64, HCCL_MAX, comm, stream))
        ok(lib.HcclBarrier(comm, stream))
        sim.sync()
        print([download(b, 4, "i"), download(recv, 3, "q"), download(g_out, 2 * world, "f"),
               download(rs_out, 2, "d")])
    """, world=3))
    for rank, out in enumerate(outs):
        bcast, reduced, gathered, scattered = eval(out)
        assert bcast == [20, 21, 22, 23]
        assert reduced == ([6, 6, 6] if rank == 1 else [-1, -1, -1])  # only the root receives
        assert gathered == [0.0, 0.0, 1.0, 100.0, 2.0, 200.0]
        assert scattered == [2 + 10 * (2 * rank), 2 + 10 * (2 * rank + 1)]


def test_data_larger_than_the_transfer_buffer_moves_in_chunks(runner, tmp_path):
    # HCCL_BUFFSIZE=1: 1 MiB per rank; 600,000 floats need three chunks, and
    # reduce-scatter's pieces (one per rank in a buffer) six.
    outs = all_ok(run_ranks(runner, tmp_path, """
        n = 600_000
        p = upload(range(rank, rank + n), "i")
        ok(lib.HcclAllReduce(p, p, n, HCCL_INT32, HCCL_SUM, comm, stream))
        g = sim.malloc(4 * n * world)
        ok(lib.HcclAllGather(p, g, n, HCCL_INT32, comm, stream))
        rs = sim.malloc(4 * n // world)
        ok(lib.HcclReduceScatter(p, rs, n // world, HCCL_INT32, HCCL_SUM, comm, stream))
        sim.sync()
        total = download(p, n, "i")
        assert total == [2 * i + 1 for i in range(n)], "all_reduce"
        assert download(g, n * world, "i") == total * world, "all_gather"
        piece = total[rank * n // world:(rank + 1) * n // world]
        assert download(rs, n // world, "i") == [2 * v for v in piece], "reduce_scatter"
        print("ok")
    """, HCCL_BUFFSIZE=1))
    assert outs == ["ok\n", "ok\n"]


def test_small_and_large_all_reduces_queued_back_to_back(runner, tmp_path):
    # Small all-reduces go through two small buffers per rank, used by turns
    # (Note [Small all-reduces meet once]); many queued at once, mixed with
    # large ones and a reduce, each must see its own inputs only. Rank 1's
    # host sleeps in between so that the ranks run out of step.
    outs = all_ok(run_ranks(runner, tmp_path, """
        small = [upload([rank * 100 + i, i, -rank], "i") for i in range(12)]
        large = upload(range(rank, rank + 10_000), "i")
        for i, p in enumerate(small):
            root = i % world
            if i % 4 == 3:
                ok(lib.HcclReduce(p, p, 3, HCCL_INT32, HCCL_SUM, root, comm, stream))
            else:
                ok(lib.HcclAllReduce(p, p, 3, HCCL_INT32, HCCL_SUM, comm, stream))
            if i % 5 == 0:
                ok(lib.HcclAllReduce(large, large, 10_000, HCCL_INT32, HCCL_SUM, comm, stream))
            if rank == 1 and i % 3 == 0:
                time.sleep(0.01)
        sim.sync()
        for i, p in enumerate(small):
            want = [sum(r * 100 + i for r in range(world)), world * i, -sum(range(world))]
            if i % 4 != 3 or i % world == rank:
                assert download(p, 3, "i") == want, (i, download(p, 3, "i"), want)
            else:
                assert download(p, 3, "i") == [rank * 100 + i, i, -rank], i
        assert download(large, 10_000, "i") == [(2 * i + 1) * 2 ** 2 for i in range(10_000)]
        print("ok")
    """))
    assert outs == ["ok\n", "ok\n"]


# HcclSendRecvItem, as ctypes lays it out (CANN's struct, hccl_types.h).
SEND_RECV_ITEM = """
class Item(ctypes.Structure):
    _fields_ = [("sendRecvType", ctypes.c_int), ("buf", ctypes.c_void_p),
                ("count", ctypes.c_uint64), ("dataType", ctypes.c_int),
                ("remoteRank", ctypes.c_uint32)]

def batch(*items):
    array_type = Item * len(items)
    return array_type(*[Item(kind, buf, count, dtype, peer)
                        for kind, buf, count, dtype, peer in items]), len(items)
"""


def test_send_and_receive_around_a_ring_and_in_batches(runner, tmp_path):
    # HCCL_BUFFSIZE=1: the 300,000-element messages move in several chunks.
    outs = all_ok(run_ranks(runner, tmp_path, SEND_RECV_ITEM + textwrap.dedent("""
        n = 300_000
        right, left = (rank + 1) % world, (rank - 1) % world
        mine = upload([rank * 1000 + i for i in range(n)], "i")
        got = upload([-1] * n, "i")
        # Plain HcclSend/HcclRecv: rank 0 sends first, the others receive first.
        if rank == 0:
            ok(lib.HcclSend(mine, n, HCCL_INT32, right, comm, stream))
            ok(lib.HcclRecv(got, n, HCCL_INT32, left, comm, stream))
        else:
            ok(lib.HcclRecv(got, n, HCCL_INT32, left, comm, stream))
            ok(lib.HcclSend(mine, n, HCCL_INT32, right, comm, stream))
        sim.sync()
        assert download(got, n, "i") == [left * 1000 + i for i in range(n)], "ring"
        # A batch: everyone sends first, to both neighbours and itself, and
        # receives two messages from the left (in order) and one from itself.
        a = upload([rank + 0.5] * 5, "d")
        b = upload([rank + 0.25] * n, "d")
        from_left_a = upload([0] * 5, "d")
        from_left_b = upload([0] * n, "d")
        from_right = upload([0] * 3, "q")
        three = upload([rank] * 3, "q")
        to_self = upload([0] * 3, "q")
        items, count = batch((HCCL_SEND, a, 5, HCCL_FP64, right),
                             (HCCL_SEND, b, n, HCCL_FP64, right),
                             (HCCL_SEND, three, 3, HCCL_INT64, left),
                             (HCCL_SEND, three, 3, HCCL_INT64, rank),
                             (HCCL_RECV, from_left_a, 5, HCCL_FP64, left),
                             (HCCL_RECV, from_left_b, n, HCCL_FP64, left),
                             (HCCL_RECV, from_right, 3, HCCL_INT64, right),
                             (HCCL_RECV, to_self, 3, HCCL_INT64, rank))
        ok(lib.HcclBatchSendRecv(items, count, comm, stream))
        # Empty messages are matched too.
        empty = upload([7], "i")
        items, count = batch((HCCL_SEND, empty, 0, HCCL_INT32, right),
                             (HCCL_RECV, empty, 0, HCCL_INT32, left))
        ok(lib.HcclBatchSendRecv(items, count, comm, stream))
        # The communicator's collectives still work after point-to-point traffic.
        ok(lib.HcclAllReduce(three, three, 3, HCCL_INT64, HCCL_SUM, comm, stream))
        sim.sync()
        assert download(from_left_a, 5, "d") == [left + 0.5] * 5
        assert download(from_left_b, n, "d") == [left + 0.25] * n
        print(download(from_right, 3, "q"), download(to_self, 3, "q"), download(three, 3, "q"),
              download(empty, 1, "i"))
    """), world=3, HCCL_BUFFSIZE=1))
    for rank, out in enumerate(outs):
        right = (rank + 1) % 3
        assert out == f"{[right] * 3} {[rank] * 3} {[3] * 3} [7]\n"


def test_all_to_all_even_and_uneven_on_three_ranks(runner, tmp_path):
    # HCCL_BUFFSIZE=1 and 200,000-element pieces: several rounds, in which
    # some pairs have finished and others have not.
    outs = all_ok(run_ranks(runner, tmp_path, """
        even = upload([rank * 100 + j for j in range(2 * world)], "q")
        out = upload([-1] * 2 * world, "q")
        ok(lib.HcclAlltoAll(even, 2, HCCL_INT64, out, 2, HCCL_INT64, comm, stream))
        sim.sync()
        print(download(out, 2 * world, "q"))
        # Rank r sends (r + 1) * (d + 1) * k elements to rank d, of value
        # 10 * r + d, laid out in reverse order of d with a gap of one element.
        k = 20_000
        def count(src, dst):
            return (src + 1) * (dst + 1) * k
        send_counts = [count(rank, d) for d in range(world)]
        sdispls, at = [0] * world, 0
        for d in reversed(range(world)):
            sdispls[d] = at
            at += send_counts[d] + 1
        values = [0] * at
        for d in range(world):
            values[sdispls[d]:sdispls[d] + send_counts[d]] = [10 * rank + d] * send_counts[d]
        send = upload(values, "i")
        recv_counts = [count(s, rank) for s in range(world)]
        rdispls = [sum(recv_counts[:s]) for s in range(world)]
        recv = upload([-1] * sum(recv_counts), "i")
        u64 = ctypes.c_uint64 * world
        ok(lib.HcclAlltoAllV(send, u64(*send_counts), u64(*sdispls), HCCL_INT32, recv,
                             u64(*recv_counts), u64(*rdispls), HCCL_INT32, comm, stream))
        sim.sync()
        expected = []
        for s in range(world):
            expected += [10 * s + rank] * count(s, rank)
        print(download(recv, sum(recv_counts), "i") == expected)
    """, world=3, HCCL_BUFFSIZE=1))
    for rank, out in enumerate(outs):
        even, uneven = out.splitlines()
        assert even == str([s * 100 + 2 * rank + i for s in range(3) for i in range(2)])
        assert uneven == "True"


def test_mismatched_point_to_point_and_all_to_all_fail_with_both_sides(runner, tmp_path):
    results = run_ranks(runner, tmp_path, """
        p = upload([1.0] * 4, "f")
        if rank == 0:
            ok(lib.HcclSend(p, 4, HCCL_FP32, 1, comm, stream))
        else:
            ok(lib.HcclRecv(p, 3, HCCL_FP32, 0, comm, stream))
        print(lib.aclrtSynchronizeDevice(), sim.err())
    """, timeout=30)
    sender, receiver = all_ok(results)
    assert receiver.startswith("507015 ") and "HcclRecv failed on rank 1 of 2" in receiver
    assert ("rank 0 sends 4 elements of HCCL_DATA_TYPE_FP32, but rank 1 receives 3 elements "
            "of HCCL_DATA_TYPE_FP32" in receiver)
    assert sender.startswith("507015 ") and "rank 1 of the communicator failed" in sender

    (tmp_path / "root").unlink()
    results = run_ranks(runner, tmp_path, """
        p = upload([1.0] * 8, "f")
        u64 = ctypes.c_uint64 * world
        counts = [2, 2] if rank == 0 else [1, 2]
        ok(lib.HcclAlltoAllV(p, u64(2, 2), u64(0, 2), HCCL_FP32, p, u64(*counts), u64(4, 6),
                             HCCL_FP32, comm, stream))
        print(lib.aclrtSynchronizeDevice(), sim.err())
    """, timeout=30)
    for out in all_ok(results):
        assert out.startswith("507015 ") and "HcclAlltoAllV failed on rank" in out
        assert "rank 0 sends 2 elements to rank 1, but rank 1 expects 1 from rank 0" in out


# Pairs of collectives that must not run together: (what rank 0 calls, what
# rank 1 calls, the descriptors the error names). `f` and `i` are device
# buffers of 8 float32 and 8 int32 elements, `c` the communicator.
MISMATCHES = [
    ("lib.HcclAllReduce(f, f, 4, HCCL_FP32, HCCL_SUM, c, stream)",
     "lib.HcclBroadcast(f, 4, HCCL_FP32, 0, c, stream)",
     "HcclAllReduce(count=4, float32, sum)", "HcclBroadcast(count=4, float32, root=0)"),
    ("lib.HcclAllReduce(f, f, 4, HCCL_FP32, HCCL_SUM, c, stream)",
     "lib.HcclAllReduce(f, f, 3, HCCL_FP32, HCCL_SUM, c, stream)",
     "HcclAllReduce(count=4, float32, sum)", "HcclAllReduce(count=3, float32, sum)"),
    ("lib.HcclAllReduce(f, f, 4, HCCL_FP32, HCCL_SUM, c, stream)",
     "lib.HcclAllReduce(i, i, 4, HCCL_INT32, HCCL_SUM, c, stream)",
     "HcclAllReduce(count=4, float32, sum)", "HcclAllReduce(count=4, int32, sum)"),
    ("lib.HcclAllReduce(f, f, 4, HCCL_FP32, HCCL_SUM, c, stream)",
     "lib.HcclAllReduce(f, f, 4, HCCL_FP32, HCCL_MAX, c, stream)",
     "HcclAllReduce(count=4, float32, sum)", "HcclAllReduce(count=4, float32, max)"),
    ("lib.HcclReduce(f, f, 4, HCCL_FP32, HCCL_SUM, 0, c, stream)",
     "lib.HcclReduce(f, f, 4, HCCL_FP32, HCCL_SUM, 1, c, stream)",
     "HcclReduce(count=4, float32, sum, root=0)", "HcclReduce(count=4, float32, sum, root=1)"),
    ("lib.HcclBroadcast(f, 8, HCCL_FP32, 0, c, stream)",
     "lib.HcclBroadcast(f, 8, HCCL_FP32, 1, c, stream)",
     "HcclBroadcast(count=8, float32, root=0)", "HcclBroadcast(count=8, float32, root=1)"),
    ("lib.HcclAllGather(f, f, 2, HCCL_FP32, c, stream)",
     "lib.HcclReduceScatter(f, f, 2, HCCL_FP32, HCCL_SUM, c, stream)",
     "HcclAllGather(count=2, float32)", "HcclReduceScatter(count=2, float32, sum)"),
    ("lib.HcclBarrier(c, stream)",
     "lib.HcclAllReduce(f, f, 4, HCCL_FP32, HCCL_SUM, c, stream)",
     "HcclBarrier()", "HcclAllReduce(count=4, float32, sum)"),
    ("lib.HcclAlltoAll(f, 2, HCCL_FP32, f, 2, HCCL_FP32, c, stream)",
     "lib.HcclAllReduce(f, f, 4, HCCL_FP32, HCCL_SUM, c, stream)",
     "HcclAlltoAll(float32)", "HcclAllReduce(count=4, float32, sum)"),
    ("lib.HcclAllReduce(f, f, 0, HCCL_FP32, HCCL_SUM, c, stream)",
     "lib.HcclAllReduce(f, f, 4, HCCL_FP32, HCCL_SUM, c, stream)",
     "HcclAllReduce(count=0, float32, sum)", "HcclAllReduce(count=4, float32, sum)"),
]


def test_mismatched_collectives_fail_every_rank_and_abort_the_communicator(runner, tmp_path):
    calls = [(first, second) for first, second, _, _ in MISMATCHES]
    results = run_ranks(runner, tmp_path, """
        f = upload([1.0] * 8, "f")
        i = upload([1] * 8, "i")
        for k, (first, second) in enumerate(CALLS):
            c = join(str(k))
            # A matched collective first: the mismatch is collective #2.
            ok(lib.HcclAllReduce(f, f, 1, HCCL_FP32, HCCL_SUM, c, stream))
            ok(eval(first if rank == 0 else second))
            print(k, lib.aclrtSynchronizeDevice(), sim.err())
            # The communicator is aborted: the next call is refused at once.
            rc = lib.HcclAllReduce(f, f, 4, HCCL_FP32, HCCL_SUM, c, stream)
            print(k, rc, sim.err())
            ok(lib.HcclCommDestroy(c))
        # A new communicator of the same ranks works.
        c = join("last")
        g = upload([rank + 1.0] * 4, "f")
        ok(lib.HcclAllReduce(g, g, 4, HCCL_FP32, HCCL_SUM, c, stream))
        sim.sync()
        print(download(g, 4, "f"))
    """.replace("CALLS", repr(calls)), HCCL_BUFFSIZE=1, timeout=60)
    outs = all_ok(results)
    for rank, out in enumerate(outs):
        lines = out.splitlines()
        assert lines[-1] == "[3.0, 3.0, 3.0, 3.0]"
        for k, (first, second, mine, theirs) in enumerate(MISMATCHES):
            failure, refusal = lines[2 * k], lines[2 * k + 1]
            api = (mine if rank == 0 else theirs).split("(")[0]
            expected = (f"rank 0 called {mine} as collective #2, rank 1 called {theirs} as "
                        "collective #2: every rank must call the same collectives")
            assert failure.startswith(f"{k} 507015 "), failure  # ACL_ERROR_RT_AICORE_EXCEPTION
            assert f"{api} failed on rank {rank} of 2: {expected}" in failure, failure
            assert "The communicator is aborted" in failure
            assert refusal.startswith(f"{k} 1 "), refusal  # HCCL_E_PARA, at the call
            assert "HcclAllReduce: the communicator was aborted" in refusal, refusal
            assert expected in refusal, refusal


# What rank 1 calls against rank 0's all-reduce, and how the error names it.
POINT_TO_POINT_CALLS = {
    "send": ("lib.HcclSend(f, 4, HCCL_FP32, 0, comm, stream)",
             "HcclSend(count=4, float32, to rank 0)"),
    "recv": ("lib.HcclRecv(f, 4, HCCL_FP32, 0, comm, stream)",
             "HcclRecv(count=4, float32, from rank 0)"),
    "batch": ("lib.HcclBatchSendRecv(*batch((HCCL_SEND, f, 4, HCCL_FP32, 0), "
              "(HCCL_RECV, g, 4, HCCL_FP32, 0)), comm, stream)",
              "HcclBatchSendRecv of 2 messages, whose send (count=4, float32, to rank 0) "
              "waits for it"),
}


@pytest.mark.parametrize("first", ["collective", "point_to_point"])
@pytest.mark.parametrize("kind", sorted(POINT_TO_POINT_CALLS))
def test_a_collective_facing_a_send_or_receive_fails_both_ranks_naming_both(
        runner, tmp_path, kind, first):
    # Note [Point-to-point meets a collective]: rank 0 all-reduces while
    # rank 1 sends to it or receives from it, whichever comes first; both
    # fail with the same message (not after the exec timeout, which is an
    # hour here), and the communicator is aborted.
    call, described = POINT_TO_POINT_CALLS[kind]
    results = run_ranks(runner, tmp_path, SEND_RECV_ITEM + textwrap.dedent(f"""
        f = upload([1.0] * 4, "f")
        g = upload([0.0] * 4, "f")
        ok(lib.HcclAllReduce(f, f, 4, HCCL_FP32, HCCL_SUM, comm, stream))  # collective #1
        sim.sync()
        # The other rank's call is already waiting when this one comes.
        if (rank == 0) != ({first!r} == "collective"):
            time.sleep(0.5)
        if rank == 0:
            ok(lib.HcclAllReduce(f, f, 4, HCCL_FP32, HCCL_SUM, comm, stream))
        else:
            ok({call})
        print(lib.aclrtSynchronizeDevice(), sim.err())
        print(lib.HcclAllReduce(f, f, 4, HCCL_FP32, HCCL_SUM, comm, stream), sim.err())
    """), HCCL_EXEC_TIMEOUT=3600, timeout=60)
    expected = (f"rank 0 called HcclAllReduce(count=4, float32, sum) as collective #2, rank 1 "
                f"called {described}: a send or receive cannot complete while its peer is "
                "inside a collective")
    for rank, out in enumerate(all_ok(results)):
        failure, refusal = out.splitlines()
        assert failure.startswith("507015 "), failure  # ACL_ERROR_RT_AICORE_EXCEPTION
        assert f"failed on rank {rank} of 2: {expected}" in failure, failure
        assert "The communicator is aborted" in failure
        assert refusal.startswith("1 ") and expected in refusal, refusal  # HCCL_E_PARA


def test_point_to_point_arguments_are_checked_on_the_host(runner, tmp_path):
    outs = all_ok(run_ranks(runner, tmp_path, SEND_RECV_ITEM + textwrap.dedent("""
        p = upload([1.0, 2.0], "f")
        items, count = batch((HCCL_SEND, p, 2, HCCL_FP32, 5))
        bad_kind, _ = batch((7, p, 2, HCCL_FP32, 0))
        u64 = ctypes.c_uint64 * world
        checks = [
            (lambda: lib.HcclSend(p, 2, HCCL_FP32, world, comm, stream), HCCL_E_PARA,
             f"destRank {world} is not a rank of this communicator of {world} ranks"),
            (lambda: lib.HcclRecv(p, 2, HCCL_FP32, rank, comm, stream), HCCL_E_PARA,
             "is this rank itself"),
            (lambda: lib.HcclRecv(p, 3, HCCL_FP32, 1 - rank, comm, stream), HCCL_E_PARA,
             "not valid for 12 bytes"),
            (lambda: lib.HcclBatchSendRecv(items, count, comm, stream), HCCL_E_PARA,
             "sendRecvInfo[0].remoteRank 5 is not a rank"),
            (lambda: lib.HcclBatchSendRecv(bad_kind, 1, comm, stream), HCCL_E_PARA,
             "neither HCCL_SEND (0) nor HCCL_RECV (1)"),
            (lambda: lib.HcclAlltoAll(p, 1, HCCL_FP32, p, 1, HCCL_INT32, comm, stream),
             HCCL_E_NOT_SUPPORT, "sendType HCCL_DATA_TYPE_FP32 and recvType"),
            (lambda: lib.HcclAlltoAll(p, 2, HCCL_FP32, p, 2, HCCL_FP32, comm, stream),
             HCCL_E_PARA, "not valid for 16 bytes"),
            (lambda: lib.HcclAlltoAllV(p, None, u64(0, 1), HCCL_FP32, p, u64(1, 1), u64(0, 1),
                                       HCCL_FP32, comm, stream), HCCL_E_PTR, "sendCounts is null"),
        ]
        for call, expected, words in checks:
            rc = call()
            message = sim.err()
            assert rc == expected and words in message, (rc, message)
        # Refused calls leave the communicator usable.
        ok(lib.HcclAllReduce(p, p, 2, HCCL_FP32, HCCL_SUM, comm, stream))
        sim.sync()
        print(download(p, 2, "f"))
    """)))
    assert outs == ["[2.0, 4.0]\n"] * 2


def test_a_send_nobody_receives_times_out_naming_the_peer(runner, tmp_path):
    results = run_ranks(runner, tmp_path, """
        p = upload([1.0], "f")
        if rank == 0:
            ok(lib.HcclSend(p, 1, HCCL_FP32, 1, comm, stream))
            print(lib.aclrtSynchronizeDevice(), sim.err())
        else:
            time.sleep(2)
    """, HCCL_EXEC_TIMEOUT=1, timeout=30)
    out = all_ok(results)[0]
    assert out.startswith("507015 ") and "HcclSend failed on rank 0 of 2" in out
    assert "timed out after 1 s (rank 0 of 2) waiting for rank 1 to receive the 1 elements" in out


def test_a_peer_that_exits_fails_a_send_to_it(runner, tmp_path):
    results = run_ranks(runner, tmp_path, """
        p = upload([1.0], "f")
        if rank == 1:
            os._exit(0)  # leaves without receiving
        ok(lib.HcclSend(p, 1, HCCL_FP32, 1, comm, stream))
        print(lib.aclrtSynchronizeDevice(), sim.err())
    """, timeout=30)
    out = all_ok(results)[0]
    assert out.startswith("507015 ") and "HcclSend failed on rank 0 of 2" in out
    assert "rank 1 (process" in out and "exited before the collective completed" in out


def test_collectives_are_device_work_on_the_stream(runner, tmp_path):
    # Rank 0's call returns while rank 1 is still away: its stream is busy
    # until rank 1 comes, and then holds the sum.
    outs = all_ok(run_ranks(runner, tmp_path, """
        p = upload([rank + 1.0], "f")
        if rank == 1:
            time.sleep(0.5)
        ok(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, stream))
        busy = sim.query() if rank == 0 else None
        sim.sync()
        print(rank, busy, download(p, 1, "f"))
    """, NPU_SIM_CHECKER=1))
    assert outs[0] == "0 1 [3.0]\n"  # 1: ACL_STREAM_STATUS_NOT_READY
    assert outs[1] == "1 None [3.0]\n"


def test_collective_activity_records_carry_bytes_and_ranks(runner, tmp_path):
    # Note [Collective activity records]: bytes is the call's count x element
    # size; rankCount and rank name the communicator; peerRank the other rank
    # of a send or receive, -1 for the others. Note [Collective wait times]:
    # a collective's waits for its peer fit in its time, the first one
    # (synchronization) in the total; other work has none.
    outs = all_ok(run_ranks(runner, tmp_path, """
        assert lib.npuSimActivityEnable(1) == 0
        p = upload([rank + 1.0] * 10, "d")
        gathered = upload([0.0] * 20, "d")
        ok(lib.HcclAllReduce(p, p, 10, HCCL_FP64, HCCL_SUM, comm, stream))
        ok(lib.HcclAllGather(p, gathered, 10, HCCL_FP64, comm, stream))
        q = upload([rank] * 3, "i")
        if rank == 0:
            ok(lib.HcclSend(q, 3, HCCL_INT32, 1, comm, stream))
        else:
            ok(lib.HcclRecv(q, 3, HCCL_INT32, 0, comm, stream))
        ok(lib.HcclBarrier(comm, stream))
        sim.sync()
        records = (ActivityRecord * 256)()
        count = ctypes.c_size_t()
        assert lib.npuSimActivityFlush(records, 256, ctypes.byref(count)) == 0
        for r in records[:count.value]:
            if r.name.startswith(b"Hccl"):
                print(r.name.decode(), r.kind, r.bytes, r.rankCount, r.rank, r.peerRank)
                assert 0 <= r.syncNs <= r.waitNs <= r.endNs - r.startNs, r.name
            else:
                assert (r.rankCount, r.peerRank) == (0, -1), r.name  # copies: not collectives
                assert (r.waitNs, r.syncNs) == (0, 0), r.name
    """))
    assert outs[0].splitlines() == ["HcclAllReduce 1 80 2 0 -1", "HcclAllGather 1 80 2 0 -1",
                                    "HcclSend 1 12 2 0 1", "HcclBarrier 1 0 2 0 -1"]
    assert outs[1].splitlines() == ["HcclAllReduce 1 80 2 1 -1", "HcclAllGather 1 80 2 1 -1",
                                    "HcclRecv 1 12 2 1 0", "HcclBarrier 1 0 2 1 -1"]


def test_bad_arguments_are_refused_with_a_message(runner, tmp_path):
    outs = all_ok(run_ranks(runner, tmp_path, """
        p = upload([1.0, 2.0], "f")
        host = ctypes.create_string_buffer(8)
        checks = [
            (lambda: lib.HcclAllReduce(p, p, 2, HCCL_INT128, HCCL_SUM, comm, stream),
             HCCL_E_NOT_SUPPORT, "HCCL_DATA_TYPE_INT128"),
            (lambda: lib.HcclAllReduce(p, p, 2, HCCL_FP32, 7, comm, stream), HCCL_E_PARA,
             "reduce op 7"),
            (lambda: lib.HcclAllReduce(host, p, 2, HCCL_FP32, HCCL_SUM, comm, stream),
             HCCL_E_PARA, "sendBuf"),
            (lambda: lib.HcclAllReduce(p, p, 3, HCCL_FP32, HCCL_SUM, comm, stream), HCCL_E_PARA,
             "not valid for 12 bytes"),
            (lambda: lib.HcclBroadcast(p, 2, HCCL_FP32, world, comm, stream), HCCL_E_PARA,
             f"root {world} is not a rank"),
            (lambda: lib.HcclBarrier(None, stream), HCCL_E_PTR, "comm is null"),
            (lambda: lib.HcclBarrier(ctypes.c_void_p(16), stream), HCCL_E_PARA,
             "not a live communicator"),
        ]
        for call, expected, words in checks:
            rc = call()
            message = sim.err()
            assert rc == expected and words in message, (rc, message)
        size, me = ctypes.c_uint32(), ctypes.c_uint32()
        ok(lib.HcclGetRankSize(comm, ctypes.byref(size)))
        ok(lib.HcclGetRankId(comm, ctypes.byref(me)))
        assert (size.value, me.value) == (world, rank)
        # The communicator still works after refused calls.
        ok(lib.HcclAllReduce(p, p, 2, HCCL_FP32, HCCL_SUM, comm, stream))
        sim.sync()
        assert download(p, 2, "f") == [2.0, 4.0]
        ok(lib.HcclCommDestroy(comm))
        assert lib.HcclCommDestroy(comm) == HCCL_E_PARA
        print("ok")
    """))
    assert outs == ["ok\n", "ok\n"]


def test_joining_times_out_naming_the_missing_rank(runner, tmp_path):
    # One process joins a communicator of two: nobody else comes.
    results = run_ranks(runner, tmp_path, "", world=1, NRANKS=2, HCCL_CONNECT_TIMEOUT=1)
    assert results[0].returncode != 0
    assert "timed out after 1 s waiting for rank(s) 1" in results[0].stderr


def test_a_rank_on_another_machine_joins_over_sockets(runner, tmp_path):
    # Note [One machine]: the root info names its machine; rank 1 claims to
    # be elsewhere (NPU_SIM_HOST_ID), so the job meets over TCP instead of
    # shared memory (Note [Socket transport]; test_sim_hccl_sockets.py has
    # the collectives). The same job on one machine does not.
    for job, (hosts, expected) in enumerate((("node-a,node-b", 1), ("", 0))):
        (tmp_path / str(job)).mkdir()
        outs = all_ok(run_ranks(runner, tmp_path / str(job), """
            p = upload([rank + 1.0], "f")
            ok(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, stream))
            sim.sync()
            sockets = ctypes.c_uint32()
            ok(lib.npuSimHcclCommUsesSockets(comm, ctypes.byref(sockets)))
            print(sockets.value, download(p, 1, "f"))
        """, HOSTS=hosts, HCCL_IF_IP="127.0.0.1"))
        assert outs == [f"{expected} [3.0]\n"] * 2


def test_a_peer_that_exits_fails_the_collective_with_its_rank(runner, tmp_path):
    results = run_ranks(runner, tmp_path, """
        p = upload([1.0], "f")
        if rank == 1:
            os._exit(0)  # leaves without taking part
        ok(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, stream))
        rc = lib.aclrtSynchronizeDevice()
        print(rc, sim.err())
        error = ctypes.c_int()
        ok(lib.HcclGetCommAsyncError(comm, ctypes.byref(error)))
        print(error.value)
        # The communicator stays failed: the next collective is refused.
        print(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, stream), sim.err())
    """, timeout=30)
    out = all_ok(results)[0].splitlines()
    assert out[0].startswith("507015 ")  # ACL_ERROR_RT_AICORE_EXCEPTION
    assert "HcclAllReduce failed on rank 0 of 2" in out[0]
    assert "rank 1 (process" in out[0] and "exited before the collective completed" in out[0]
    assert out[1] == "21"  # HCCL_E_REMOTE
    assert out[2].startswith("21 HcclAllReduce: the communicator was aborted") and (
        "failed in an earlier collective" in out[2] and "exited before the collective" in out[2])


def test_a_late_peer_times_out_and_fails_its_peers_too(runner, tmp_path):
    results = run_ranks(runner, tmp_path, """
        p = upload([1.0], "f")
        if rank == 1:
            time.sleep(3)
        ok(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, stream))
        print(lib.aclrtSynchronizeDevice(), sim.err())
    """, HCCL_EXEC_TIMEOUT=1, timeout=30)
    first, late = all_ok(results)
    assert first.startswith("507015 ") and "timed out after 1 s waiting for rank(s) 1" in first
    assert "HCCL_EXEC_TIMEOUT" in first
    # Rank 1 arrives to find rank 0 gone from the collective.
    assert late.startswith("507015 ") and "rank 0 of the communicator failed" in late


# HcclCommConfig as CANN lays it out: a 24-byte header (size, magic word,
# version, reserved), then the fields; these tests set two of them.
COMM_CONFIG = """
CONFIG_BYTES, BUFFER_SIZE_AT, EXEC_TIMEOUT_AT = 2240, 24, 316

def comm_config(exec_timeout=-1, buffer_mib=0xFFFFFFFF, magic=0xF0F0F0F0):
    raw = bytearray(CONFIG_BYTES)
    struct.pack_into("<QII", raw, 0, CONFIG_BYTES, magic, 10)
    struct.pack_into("<I", raw, BUFFER_SIZE_AT, buffer_mib)
    struct.pack_into("<i", raw, EXEC_TIMEOUT_AT, exec_timeout)
    return ctypes.create_string_buffer(bytes(raw), CONFIG_BYTES)
"""


def test_the_config_exec_timeout_takes_precedence_over_the_environment(runner, tmp_path):
    results = run_ranks(runner, tmp_path, COMM_CONFIG + textwrap.dedent("""
        bad, fresh = ctypes.c_void_p(), ctypes.create_string_buffer(HCCL_ROOT_INFO_BYTES)
        ok(lib.HcclGetRootInfo(fresh))
        print(lib.HcclCommInitRootInfoConfig(2, fresh, rank, comm_config(magic=0),
                                             ctypes.byref(bad)), sim.err())
        c = join("config", comm_config(exec_timeout=1))
        p = upload([1.0], "f")
        if rank == 1:
            time.sleep(2.5)  # alive, but late for the collective
        ok(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, c, stream))
        print(lib.aclrtSynchronizeDevice(), sim.err())
    """), HCCL_EXEC_TIMEOUT=600, timeout=30)
    first, late = all_ok(results)
    refused = first.splitlines()[0]
    assert refused.startswith(f"{HCCL_E_PARA} HcclCommInitRootInfoConfig: config was not "
                              "initialised"), refused
    failure = first.splitlines()[1]
    assert ("HcclAllReduce(count=1, float32, sum), collective #1 of this communicator timed out "
            "after 1 s waiting for rank(s) 1 (rank 0 of 2), which did not arrive") in failure
    assert "The limit is the communicator's hcclExecTimeOut" in failure, failure


def test_a_single_rank_communicator(runner, tmp_path):
    outs = all_ok(run_ranks(runner, tmp_path, """
        p = upload([1, 2, 3], "q")
        ok(lib.HcclAllReduce(p, p, 3, HCCL_INT64, HCCL_PROD, comm, stream))
        ok(lib.HcclBarrier(comm, stream))
        sim.sync()
        print(download(p, 3, "q"))
    """, world=1))
    assert outs == ["[1, 2, 3]\n"]


def communicator_leftovers(name):
    """What of the communicator `name` the machine holds: files in /dev/shm
    and sockets named after it."""
    files = [n for n in os.listdir("/dev/shm") if n.startswith("npu-sim-hccl")]
    with open("/proc/net/unix") as f:
        sockets = [line.split()[-1] for line in f if line.rstrip().endswith("@" + name)]
    return [n for n in files if name in n] + sockets


def maps_a_segment(pid):
    """Whether process `pid` has a communicator's segment mapped (Note [Shared
    segments]: an unnamed file of /dev/shm, or a memfd where that is not
    possible)."""
    with open(f"/proc/{pid}/maps") as f:
        return any("/dev/shm/#" in line or "memfd:npu-sim-hccl" in line for line in f)


def test_the_shared_region_is_gone_after_the_job(runner, tmp_path):
    before = set(os.listdir("/dev/shm"))
    outs = all_ok(run_ranks(runner, tmp_path, """
        p = upload([1.0], "f")
        ok(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, stream))
        sim.sync()
        # Rank 0 took part in a collective, so it has finished joining: the
        # segment never had a name in /dev/shm, and rank 0 has closed the
        # socket the ranks met at.
        with open("/proc/net/unix") as f:
            print(os.path.exists("/dev/shm/" + segment), ("@" + segment) in f.read())
    """))
    assert outs == ["False False\n", "False False\n"]
    leaked = [n for n in set(os.listdir("/dev/shm")) - before if n.startswith("npu-sim-hccl")]
    assert leaked == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hold the name as another user")
def test_a_name_another_user_holds_is_never_used(runner, tmp_path):
    # Note [Shared segments]: rank 0 cannot claim a name another process
    # holds, and a joining rank refuses a name held by another user.
    result = runner.run(SEGMENT_OF + textwrap.dedent("""
        import socket
        sim.set_device(0)
        root = ctypes.create_string_buffer(HCCL_ROOT_INFO_BYTES)
        assert lib.HcclGetRootInfo(root) == HCCL_SUCCESS
        name = segment_of(root.raw)
        ready_r, ready_w = os.pipe()
        squatter = os.fork()
        if squatter == 0:
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind("\\0" + name)
            s.listen()
            os.write(ready_w, b"x")
            time.sleep(60)
            os._exit(0)
        os.read(ready_r, 1)
        comm = ctypes.c_void_p()
        print(lib.HcclCommInitRootInfo(2, root, 0, ctypes.byref(comm)), sim.err())
        print(lib.HcclCommInitRootInfo(2, root, 1, ctypes.byref(comm)), sim.err())
        os.kill(squatter, 9)
        os.waitpid(squatter, 0)
    """))
    assert result.returncode == 0, result.stderr
    creator, joiner = result.stdout.splitlines()
    assert creator.startswith(f"{HCCL_E_PARA} HcclCommInitRootInfo: the communicator's name ")
    assert "is already in use on this machine: another process holds it" in creator, creator
    assert joiner.startswith(f"{HCCL_E_PARA} HcclCommInitRootInfo: the communicator's name ")
    assert "is held by a process of user 65534, not of this user (0)" in joiner, joiner


def start_joining_ranks(runner, tmp_path, ranks, nranks, **env):
    """Starts `ranks` processes of a communicator of `nranks` ranks (fewer
    than it needs, so they wait in the connect phase); returns them once all
    have mapped the segment."""
    code = Runner.PRELUDE.format(tests=str(TESTS_DIR)) + JOIN
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=runner.env(RANK=r, WORLD=ranks, NRANKS=nranks,
                                             ROOT_FILE=tmp_path / "root", HCCL_BUFFSIZE=1, **env))
             for r in range(ranks)]
    deadline = time.time() + 60
    while not all(maps_a_segment(p.pid) for p in procs):
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"a rank exited while joining: {p.communicate()}")
        assert time.time() < deadline, "the ranks never mapped the segment"
        time.sleep(0.01)
    return procs


@pytest.mark.parametrize("victim", [0, 1])
def test_a_rank_killed_while_joining_leaves_nothing_behind(runner, tmp_path, victim):
    # A communicator of three ranks of which two come: both wait in the
    # connect phase until one is killed; the other then fails at once,
    # naming it, and nothing of the communicator remains once both have exited.
    procs = start_joining_ranks(runner, tmp_path, 2, 3)
    try:
        procs[victim].send_signal(signal.SIGKILL)
        _, err = procs[1 - victim].communicate(timeout=30)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert f"rank {victim} (process {procs[victim].pid}) exited" in err, err
    assert communicator_leftovers(segment_name(tmp_path / "root")) == []


def test_every_rank_killed_while_joining_leaves_nothing_behind(runner, tmp_path):
    # Note [Shared segments]: with every process of the job killed inside
    # the connect phase (both have mapped the segment and wait for the third
    # rank), nobody is left to clean up, and nothing needs to be; the same
    # root info then makes a working communicator.
    procs = start_joining_ranks(runner, tmp_path, 2, 3)
    name = segment_name(tmp_path / "root")
    assert communicator_leftovers(name) == ["@" + name]  # rank 0 serves the segment
    for proc in procs:
        proc.send_signal(signal.SIGKILL)
    for proc in procs:
        proc.wait()
    assert communicator_leftovers(name) == []
    outs = all_ok(run_ranks(runner, tmp_path, """
        p = upload([rank + 1.0], "f")
        ok(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, stream))
        sim.sync()
        print(download(p, 1, "f"))
    """, world=3, ROOT_GIVEN=1))
    assert outs == ["[6.0]\n"] * 3
    assert communicator_leftovers(name) == []


def test_every_rank_of_a_rank_table_killed_while_joining_leaves_nothing_behind(runner, tmp_path):
    # As above for HcclCommInitClusterInfo, whose communicator every rank
    # names alike from the table: the same table works again at once.
    table = tmp_path / "table.json"
    # The path makes the table's bytes, and so its communicator, this test's own.
    table.write_text(json.dumps({"status": "completed", "job": str(tmp_path), "server_list": [
        {"server_id": "127.0.0.1",
         "device": [{"device_id": str(r), "rank_id": str(r)} for r in range(3)]}]}))
    code = Runner.PRELUDE.format(tests=str(TESTS_DIR)) + textwrap.dedent(f"""
        rank = int(os.environ["RANK"])
        sim.set_device(rank)
        comm = ctypes.c_void_p()
        assert lib.HcclCommInitClusterInfo({str(table)!r}.encode(), rank,
                                           ctypes.byref(comm)) == HCCL_SUCCESS, sim.err()
        p = sim.malloc(4)
        sim.h2d(p, array.array("f", [rank + 1.0]).tobytes(), sync=True)
        assert lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, None) == HCCL_SUCCESS
        sim.sync()
        out = array.array("f")
        out.frombytes(sim.d2h(p, 4, sync=True).raw)
        print(out.tolist())
    """)
    def start(ranks):
        return [subprocess.Popen([sys.executable, "-c", "import array\n" + code],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=runner.env(RANK=r, HCCL_BUFFSIZE=1))
                for r in ranks]

    def table_sockets():
        with open("/proc/net/unix") as f:
            return [line.split()[-1] for line in f if "@npu-sim-hccl-table-" in line]

    others = set(table_sockets())  # of other jobs on this machine
    files = set(os.listdir("/dev/shm"))
    procs = start(range(2))  # rank 2 never comes
    deadline = time.time() + 60
    while not all(maps_a_segment(p.pid) for p in procs):
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        assert time.time() < deadline, "the ranks never mapped the segment"
        time.sleep(0.01)
    ours = set(table_sockets()) - others
    assert len(ours) == 1
    for proc in procs:
        proc.send_signal(signal.SIGKILL)
    for proc in procs:
        proc.wait()
    assert not ours & set(table_sockets())
    assert not [n for n in set(os.listdir("/dev/shm")) - files if n.startswith("npu-sim-hccl")]
    procs = start(range(3))
    results = [proc.communicate(timeout=60) for proc in procs]
    assert [out for out, _ in results] == ["[6.0]\n"] * 3, results
    assert not ours & set(table_sockets())


def segment_name(root_file):
    """The communicator's name in the root info in `root_file`."""
    scope = {}
    exec(SEGMENT_OF, scope)
    return scope["segment_of"](root_file.read_bytes())


def test_no_room_in_dev_shm_is_an_error_at_init(runner, tmp_path):
    # 64 GiB of transfer buffer (HCCL_BUFFSIZE is MiB per rank): more than
    # this machine's /dev/shm holds, so it is refused when the communicator
    # is made, not found out by a SIGBUS inside a collective.
    shm = os.statvfs("/dev/shm")
    if shm.f_bavail * shm.f_frsize >= 64 << 30:
        pytest.skip("/dev/shm holds 64 GiB here: the check would allocate it")
    before = set(os.listdir("/dev/shm"))
    results = run_ranks(runner, tmp_path, "", world=1, HCCL_BUFFSIZE=65536)
    assert results[0].returncode != 0
    assert "HcclCommInitRootInfo: no room in /dev/shm for the 65536 MiB" in results[0].stderr
    assert "lower HCCL_BUFFSIZE" in results[0].stderr
    assert not [n for n in set(os.listdir("/dev/shm")) - before if n.startswith("npu-sim-hccl")]


def test_rank_tables_join_the_ranks_and_bad_ones_are_refused_with_a_message(runner, tmp_path):
    # HcclCommInitClusterInfo: the ranks of a rank table meet without a root
    # info; a table that is unreadable, malformed or inconsistent is refused
    # at once, saying what and where (rank_table.h).
    def table(devices, servers=("127.0.0.1",), status="completed"):
        return json.dumps({"version": "1.0", "status": status, "server_count": str(len(servers)),
                           "server_list": [{"server_id": s, "device": [{"device_id": d, "rank_id": r}
                                                                      for d, r in devices]}
                                           for s in servers]})
    good = tmp_path / "good.json"
    good.write_text(table([("0", "0"), ("1", 1)]))  # numbers as strings or as numbers
    bad = {
        "missing": (None, HCCL_E_PARA, "cannot be read"),
        "malformed": ('{"server_list": [}', HCCL_E_PARA, "not valid JSON at line 1, column 18"),
        "unfinished": (table([("0", "0")], status="building"), HCCL_E_PARA, "not \"completed\""),
        "rank_twice": (table([("0", "0"), ("1", "0")]), HCCL_E_PARA, "rank_id 0 is listed twice"),
        "device_twice": (table([("0", "0"), ("0", "1")]), HCCL_E_PARA, "device 0 of server 127.0.0.1 is listed twice"),
        "gap": (table([("0", "0"), ("1", "2")]), HCCL_E_PARA, "rank 1 is missing"),
        "not_a_number": (table([("0", "zero")]), HCCL_E_PARA, "rank_id is not a non-negative integer"),
        "other_rank": (table([("0", "0")]), HCCL_E_PARA, "rank 3 is not in the rank table"),
    }
    two_servers = tmp_path / "two_servers.json"
    two_servers.write_text(json.dumps({"status": "completed", "server_list": [
        {"server_id": "a", "device": [{"device_id": "0", "rank_id": "0"}]},
        {"server_id": "b", "device": [{"device_id": "0", "rank_id": "1"}]}]}))
    cases = []
    for name, (text, code, words) in bad.items():
        path = tmp_path / f"{name}.json"
        if text is not None:
            path.write_text(text)
        cases.append((str(path), 3 if name == "other_rank" else 0, code, words))
    # Several servers meet over TCP at rank 0's (test_sim_hccl_sockets.py),
    # so its server_id must be an address.
    cases.append((str(two_servers), 0, HCCL_E_PARA,
                  "rank 0's server_id 'a' is not an IPv4 address"))
    outs = all_ok(run_ranks(runner, tmp_path, f"""
        comm = ctypes.c_void_p()
        if rank == 0:
            for path, table_rank, code, words in {cases!r}:
                rc = lib.HcclCommInitClusterInfo(path.encode(), table_rank, ctypes.byref(comm))
                message = sim.err()
                assert rc == code and words in message, (path, rc, message)
            # The device the table gives rank 1 is not this thread's.
            rc = lib.HcclCommInitClusterInfo({str(good)!r}.encode(), 1, ctypes.byref(comm))
            assert rc == HCCL_E_PARA and "rank 1 is device 1" in sim.err(), rc
        ok(lib.HcclCommInitClusterInfo({str(good)!r}.encode(), rank, ctypes.byref(comm)))
        size = ctypes.c_uint32()
        ok(lib.HcclGetRankSize(comm, ctypes.byref(size)))
        p = upload([float(rank + 1)] * 3, "f")
        ok(lib.HcclAllReduce(p, p, 3, HCCL_FP32, HCCL_SUM, comm, stream))
        sim.sync()
        print(size.value, download(p, 3, "f"))
        ok(lib.HcclCommDestroy(comm))
    """))
    assert outs == ["2 [3.0, 3.0, 3.0]\n", "2 [3.0, 3.0, 3.0]\n"]
