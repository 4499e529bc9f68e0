"""The simulated HCCL's direct collectives (Note [Direct collectives]): ranks
read each other's device buffers, through mappings of each other's device
memory when their heaps are shared (Note [Device heap kind]) or with
cross-memory attach, instead of moving data through the shared transfer
buffers, with the transfer buffers as the fallback where the kernel refuses
both."""

import signal
import subprocess
import sys
import textwrap
import time

import pytest
from _simrunner import TESTS_DIR, Runner
from test_sim_hccl import JOIN, all_ok, run_ranks

# Every collective on data larger than a small all-reduce, 3 ranks, in place
# and out of place, with values whose sums round (float32 and float16), so
# that any change in the order of combination changes bits. Prints whether
# the communicator is direct and its transport, then a digest of every
# result.
EVERY_KIND = """
import hashlib, random
direct, transport = ctypes.c_uint32(7), ctypes.c_uint32(7)
assert lib.npuSimHcclCommIsDirect(comm, ctypes.byref(direct)) == HCCL_SUCCESS
assert lib.npuSimHcclCommTransport(comm, ctypes.byref(transport)) == HCCL_SUCCESS
print(direct.value, transport.value)
rng = random.Random(rank)
piece = 40_001  # elements per rank: shares and chunks of uneven sizes
n = piece * world

def floats(k, code="f"):
    return upload([rng.uniform(-1, 1) * 10.0 ** rng.randint(-6, 6) for _ in range(k)], code)

def show(p, nbytes):
    sim.sync()
    print(hashlib.sha256(sim.d2h(p, nbytes, sync=True).raw).hexdigest())

for op in (HCCL_SUM, HCCL_PROD, HCCL_MAX, HCCL_MIN):
    send, recv = floats(n), sim.malloc(4 * n)
    ok(lib.HcclAllReduce(send, recv, n, HCCL_FP32, op, comm, stream))
    ok(lib.HcclAllReduce(send, send, n, HCCL_FP32, op, comm, stream))  # in place
    show(recv, 4 * n)
    show(send, 4 * n)
half = sim.malloc(2 * n)  # array has no float16: pack it
sim.h2d(half, struct.pack(f"<{n}e", *[rng.uniform(-8, 8) for _ in range(n)]), sync=True)
ok(lib.HcclAllReduce(half, half, n, HCCL_FP16, HCCL_SUM, comm, stream))
show(half, 2 * n)
send, recv = floats(n), sim.malloc(4 * n)
ok(lib.HcclReduce(send, recv, n, HCCL_FP32, HCCL_SUM, 1, comm, stream))
ok(lib.HcclReduce(send, send, n, HCCL_FP32, HCCL_SUM, 0, comm, stream))
show(recv, 4 * n) if rank == 1 else None
show(send, 4 * n)
data = floats(n)
ok(lib.HcclBroadcast(data, n, HCCL_FP32, 2, comm, stream))
show(data, 4 * n)
send, recv = floats(piece), sim.malloc(4 * n)
ok(lib.HcclAllGather(send, recv, piece, HCCL_FP32, comm, stream))
show(recv, 4 * n)
inplace = floats(n)
ok(lib.HcclAllGather(inplace + 4 * piece * rank, inplace, piece, HCCL_FP32, comm, stream))
show(inplace, 4 * n)
send, recv = floats(n), sim.malloc(4 * piece)
ok(lib.HcclReduceScatter(send, recv, piece, HCCL_FP32, HCCL_SUM, comm, stream))
ok(lib.HcclReduceScatter(send, send, piece, HCCL_FP32, HCCL_SUM, comm, stream))
show(recv, 4 * piece)
show(send, 4 * n)
send, recv = floats(n), sim.malloc(4 * n)
ok(lib.HcclAlltoAll(send, piece, HCCL_FP32, recv, piece, HCCL_FP32, comm, stream))
show(recv, 4 * n)
# Uneven: rank s sends (s + d + 1) * 5000 elements to rank d, in reverse order.
count = lambda s, d: (s + d + 1) * 5000
sends = [count(rank, d) for d in range(world)]
sdispls = [sum(sends[d + 1:]) for d in range(world)]
recvs = [count(s, rank) for s in range(world)]
rdispls = [sum(recvs[:s]) for s in range(world)]
send, recv = floats(sum(sends)), sim.malloc(4 * sum(recvs))
u64 = ctypes.c_uint64 * world
ok(lib.HcclAlltoAllV(send, u64(*sends), u64(*sdispls), HCCL_FP32, recv, u64(*recvs),
                     u64(*rdispls), HCCL_FP32, comm, stream))
show(recv, 4 * sum(recvs))
"""


# npuSimHcclCommTransport's values.
STAGING, CROSS_MEMORY, MAPPED = 1, 2, 3


@pytest.mark.parametrize("heap,transport", [("shared", MAPPED), ("private", CROSS_MEMORY)])
def test_direct_results_are_bitwise_those_of_the_staging_path(runner, tmp_path, heap,
                                                              transport):
    (tmp_path / "direct").mkdir()
    (tmp_path / "staging").mkdir()
    direct = all_ok(run_ranks(runner, tmp_path / "direct", EVERY_KIND, world=3,
                              NPU_SIM_DEVICE_HEAP=heap))
    # A one-MiB transfer buffer: the staging path moves the data in chunks.
    staging = all_ok(run_ranks(runner, tmp_path / "staging", EVERY_KIND, world=3,
                               NPU_SIM_HCCL_TRANSPORT="staging", HCCL_BUFFSIZE=1,
                               NPU_SIM_DEVICE_HEAP=heap))
    for rank in range(3):
        d, s = direct[rank].splitlines(), staging[rank].splitlines()
        assert d[0] == f"1 {transport}" and s[0] == f"0 {STAGING}", (d[0], s[0])
        assert len(d) == len(s) > 15
        assert d[1:] == s[1:], f"rank {rank}"
    # The inputs differ per rank, so the results of an all-reduce agree.
    assert direct[0].splitlines()[1:3] == direct[1].splitlines()[1:3]


TRANSPORT_OF_A_SUM = """
    transport = ctypes.c_uint32(7)
    ok(lib.npuSimHcclCommTransport(comm, ctypes.byref(transport)))
    n = 100_003
    p = upload(range(rank, rank + n), "i")
    ok(lib.HcclAllReduce(p, p, n, HCCL_INT32, HCCL_SUM, comm, stream))
    sim.sync()
    print(transport.value, download(p, n, "i") == [2 * i + 1 for i in range(n)])
"""


@pytest.mark.parametrize("env,transport", [
    # A launcher's variables make a rank's heap shared, so its peers map it.
    ({"WORLD_SIZE": 2}, MAPPED),
    ({"LOCAL_WORLD_SIZE": 2, "WORLD_SIZE": 4}, MAPPED),
    # No launcher's variables (torch.multiprocessing.spawn): the heaps start
    # private and joining the communicator makes them shared.
    ({}, MAPPED),
    ({"NPU_SIM_DEVICE_HEAP": "private"}, CROSS_MEMORY),
    ({"WORLD_SIZE": 2, "NPU_SIM_DEVICE_HEAP": "private"}, CROSS_MEMORY),
    ({"NPU_SIM_DEVICE_HEAP": "shared", "NPU_SIM_HCCL_TRANSPORT": "direct"}, CROSS_MEMORY),
    ({"NPU_SIM_DEVICE_HEAP": "shared", "NPU_SIM_HCCL_TRANSPORT": "staging"}, STAGING),
])
def test_the_transport_follows_the_heaps_and_the_setting(runner, tmp_path, env, transport):
    results = run_ranks(runner, tmp_path, TRANSPORT_OF_A_SUM, **env)
    assert all_ok(results) == [f"{transport} True\n"] * 2


@pytest.mark.parametrize("heap,capability,pages", [("shared", "", "1"), ("shared", "", "4"),
                                                   ("private", "", "1"),
                                                   ("shared", "default", "4")])
def test_large_outputs_written_around_the_cache_hold_every_byte(runner, tmp_path, heap,
                                                                capability, pages):
    # Note [Bulk copies bypass the cache]: outputs from 16 MiB on are
    # written with non-temporal stores, in whole 64-byte lines between plain
    # head and tail copies, the body four pages at a time and the lines
    # after the last four pages one by one; odd counts and a misaligned
    # buffer (4 bytes past an allocation's start) put both ends off a line
    # and leave lines after the last four pages. ATEN_CPU_CAPABILITY=default
    # takes the 16-byte stores that CPUs without AVX-512 use;
    # NPU_SIM_STREAM_PAGES both orders of the lines (Note [Page streams
    # follow the CPU]).
    results = run_ranks(runner, tmp_path, """
        n = (17 << 18) + 3  # int32: a little over 17 MiB
        def ints(values):
            return array.array("i", values)

        def fetch(p, k):
            out = array.array("i")
            out.frombytes(sim.d2h(p, 4 * k, sync=True).raw)
            return out

        def space(k):  # k int32 from 4 bytes past an allocation's start
            return sim.malloc(4 * k + 4) + 4

        def placed(values):
            p = space(len(values))
            sim.h2d(p, ints(values).tobytes(), sync=True)
            return p

        checks = []
        send, recv = placed(range(rank, rank + n)), space(n)
        ok(lib.HcclAllReduce(send, recv, n, HCCL_INT32, HCCL_SUM, comm, stream))
        ok(lib.HcclAllReduce(send, send, n, HCCL_INT32, HCCL_SUM, comm, stream))
        sim.sync()
        total = ints(range(1, 2 * n + 1, 2))
        checks += [fetch(recv, n) == total, fetch(send, n) == total]
        data = placed(range(n) if rank == 1 else [0] * n)
        ok(lib.HcclBroadcast(data, n, HCCL_INT32, 1, comm, stream))
        sim.sync()
        checks.append(fetch(data, n) == ints(range(n)))
        piece = n // 2
        send, recv = placed(range(rank * piece, (rank + 1) * piece)), space(2 * piece)
        ok(lib.HcclAllGather(send, recv, piece, HCCL_INT32, comm, stream))
        sim.sync()
        checks.append(fetch(recv, 2 * piece) == ints(range(2 * piece)))
        send, recv = placed(range(rank, rank + 2 * n)), space(n)
        ok(lib.HcclReduceScatter(send, recv, n, HCCL_INT32, HCCL_SUM, comm, stream))
        sim.sync()
        checks.append(fetch(recv, n) == ints(range(2 * rank * n + 1, 2 * (rank + 1) * n + 1, 2)))
        send = placed(range(rank * 2 * piece, (rank + 1) * 2 * piece))
        recv = space(2 * piece)
        ok(lib.HcclAlltoAll(send, piece, HCCL_INT32, recv, piece, HCCL_INT32, comm, stream))
        sim.sync()
        mine = lambda r: range(r * 2 * piece + rank * piece, r * 2 * piece + (rank + 1) * piece)
        checks.append(fetch(recv, 2 * piece) == ints(list(mine(0)) + list(mine(1))))
        print(checks)
    """, NPU_SIM_DEVICE_HEAP=heap, ATEN_CPU_CAPABILITY=capability, NPU_SIM_STREAM_PAGES=pages)
    assert all_ok(results) == ["[True, True, True, True, True, True]\n"] * 2


# Reduce-scatters whose outputs are large enough to be written around the
# cache (Note [Bulk reductions bypass the cache]), 3 ranks, on random bits
# (NaNs with payloads, infinities, zeros of both signs, wrapping integers):
# every type and op that pass covers and one it leaves to the usual
# reduction, into an output 8 bytes past a line (a head and a tail of
# elements, and lines after the last four pages), and in place (rank 0's
# output is its input; the others' overlap what their peers read); then
# all-reduces of shares as large. Prints a digest of every result.
LARGE_REDUCE_SCATTERS = """
import hashlib, random
piece = (16 << 20) + 200  # bytes per rank: more than 16 MiB, not whole lines
data = random.Random(rank).randbytes(world * piece)  # the same in every run
send, recv = sim.malloc(world * piece), sim.malloc(piece + 64) + 8
cases = [(HCCL_FP32, op) for op in (HCCL_SUM, HCCL_PROD, HCCL_MAX, HCCL_MIN)] + [
    (HCCL_FP64, HCCL_SUM), (HCCL_FP64, HCCL_MAX), (HCCL_INT32, HCCL_PROD),
    (HCCL_INT32, HCCL_MIN), (HCCL_UINT32, HCCL_MAX), (HCCL_INT64, HCCL_SUM),
    (HCCL_INT64, HCCL_MAX), (HCCL_UINT64, HCCL_MIN)] + [
    (dtype, op) for dtype in (HCCL_FP16, HCCL_BFP16)  # Note [16-bit float reductions in lanes]
    for op in (HCCL_SUM, HCCL_PROD, HCCL_MAX, HCCL_MIN)]
for dtype, op in cases:
    size = (2 if dtype in (HCCL_FP16, HCCL_BFP16)
            else 8 if dtype in (HCCL_FP64, HCCL_INT64, HCCL_UINT64) else 4)
    sim.h2d(send, data, sync=True)
    ok(lib.HcclReduceScatter(send, recv, piece // size, dtype, op, comm, stream))
    ok(lib.HcclReduceScatter(send, send, piece // size, dtype, op, comm, stream))
    sim.sync()
    print(dtype, op, hashlib.sha256(sim.d2h(recv, piece, sync=True).raw).hexdigest(),
          hashlib.sha256(sim.d2h(send, piece, sync=True).raw).hexdigest())
# All-reduces whose shares are that large (Note [All-reduce shares reduce in
# one pass], Note [All-reduce writes every rank's share]), into an output 8
# bytes past a line and in place; the last two into outputs whose offsets
# from a line differ between the ranks (each rank then writes its share
# into the others' outputs with copies, not with the one-pass kernel's
# stores), the float16 one with a type the one-pass kernel leaves out.
base = sim.malloc(world * piece + 64)
for dtype, op, skew in [(HCCL_FP32, HCCL_SUM, 8), (HCCL_FP64, HCCL_MAX, 8),
                        (HCCL_INT64, HCCL_SUM, 8), (HCCL_FP32, HCCL_PROD, 8 + 16 * rank),
                        (HCCL_FP16, HCCL_SUM, 8 + 16 * rank)]:
    size = {HCCL_FP32: 4, HCCL_FP16: 2}.get(dtype, 8)
    out = base + skew
    sim.h2d(send, data, sync=True)
    ok(lib.HcclAllReduce(send, out, world * piece // size, dtype, op, comm, stream))
    ok(lib.HcclAllReduce(send, send, world * piece // size, dtype, op, comm, stream))
    sim.sync()
    print("all-reduce", dtype, op,
          hashlib.sha256(sim.d2h(out, world * piece, sync=True).raw).hexdigest(),
          hashlib.sha256(sim.d2h(send, world * piece, sync=True).raw).hexdigest())
"""


def test_large_reductions_around_the_cache_are_bitwise_those_of_the_staging_path(runner,
                                                                                tmp_path):
    results = {}
    for name, env in [("mapped", {"NPU_SIM_STREAM_PAGES": "1"}),
                      ("four pages", {"NPU_SIM_STREAM_PAGES": "4"}),
                      ("narrow", {"ATEN_CPU_CAPABILITY": "default"}),
                      ("staging", {"NPU_SIM_HCCL_TRANSPORT": "staging"})]:
        (tmp_path / name).mkdir()
        results[name] = all_ok(run_ranks(runner, tmp_path / name, LARGE_REDUCE_SCATTERS,
                                         world=3, timeout=240, NPU_SIM_DEVICE_HEAP="shared",
                                         **env))
    for rank in range(3):
        lines = results["mapped"][rank].splitlines()
        assert len(lines) == 25, lines
        assert (results["narrow"][rank] == results["staging"][rank] == results["mapped"][rank]
                == results["four pages"][rank]), f"rank {rank}"


def test_joining_makes_a_private_heap_shared_keeping_its_allocations(runner, tmp_path):
    # Note [Device heap kind]: ranks no launcher describes allocate, write,
    # free and enqueue copies on their private heaps before they join; the
    # join moves the live allocations to shared memory at the same
    # addresses, after the queued copies ran, and the peers then read them
    # through mappings.
    results = run_ranks(runner, tmp_path, """
        transport = ctypes.c_uint32(7)
        ok(lib.npuSimHcclCommTransport(comm, ctypes.byref(transport)))
        kept = download(early, n_early, "i") == list(range(r0, r0 + n_early))
        queued = download(late, n_early, "i") == list(range(r0 + 1, r0 + 1 + n_early))
        ok(lib.HcclAllReduce(early, early, n_early, HCCL_INT32, HCCL_SUM, comm, stream))
        sim.sync()
        summed = download(early, n_early, "i") == [2 * i + 1 for i in range(n_early)]
        after = upload(range(rank, rank + n_early), "i")  # allocations go on as before
        ok(lib.HcclAllGather(after, late, n_early // 2, HCCL_INT32, comm, stream))
        sim.sync()
        gathered = download(late, n_early, "i")
        half = n_early // 2
        print(transport.value, kept, queued, summed,
              gathered == list(range(half)) + list(range(1, half + 1)))
    """, before_join="""
        import array
        r0 = int(os.environ["RANK"])
        sim.set_device(r0)
        n_early = 300_002  # 1.2 MB: several pages, and an all-reduce of the large path
        freed = sim.malloc(1 << 20)
        early = sim.malloc(4 * n_early)
        sim.h2d(early, array.array("i", range(r0, r0 + n_early)).tobytes(), sync=True)
        sim.free(freed)
        late = sim.malloc(4 * n_early)
        # Left queued on the default stream when the rank joins.
        sim.h2d(late, array.array("i", range(r0 + 1, r0 + 1 + n_early)).tobytes(), sync=False)
    """)
    assert all_ok(results) == [f"{MAPPED} True True True True\n"] * 2


def test_one_private_heap_makes_the_whole_communicator_read_across_memory(runner, tmp_path):
    # Rank 1's peers cannot map its heap: every rank falls back together.
    results = run_ranks(runner, tmp_path, TRANSPORT_OF_A_SUM, before_join="""
        if os.environ["RANK"] == "1":
            os.environ["NPU_SIM_DEVICE_HEAP"] = "private"
    """, NPU_SIM_DEVICE_HEAP="shared")
    assert all_ok(results) == [f"{CROSS_MEMORY} True\n"] * 2


def test_mapped_collectives_read_memory_outside_the_heap_too(runner, tmp_path):
    # aclrtMapMem memory is not in the heap the peers map: they read it
    # across memory instead, in the same collective as heap memory.
    results = run_ranks(runner, tmp_path, """
        transport = ctypes.c_uint32(7)
        ok(lib.npuSimHcclCommTransport(comm, ctypes.byref(transport)))
        n = 1 << 20  # 4 MiB of int32: two granules
        prop = PhysicalMemProp(0, 0, 1, MemLocation(rank, ACL_MEM_LOCATION_TYPE_DEVICE), 0)
        handle = ctypes.c_void_p()
        ok(lib.aclrtMallocPhysical(ctypes.byref(handle), 4 * n, ctypes.byref(prop), 0))
        virt = ctypes.c_void_p()
        ok(lib.aclrtReserveMemAddress(ctypes.byref(virt), 4 * n, 0, None, 0))
        ok(lib.aclrtMapMem(virt, 4 * n, 0, handle, 0))
        sim.h2d(virt.value, array.array("i", range(rank, rank + n)).tobytes(), sync=True)
        recv = sim.malloc(4 * n * world)
        ok(lib.HcclAllGather(virt.value, recv, n, HCCL_INT32, comm, stream))
        sim.sync()
        got = download(recv, n * world, "i")
        print(transport.value, got == list(range(n)) + list(range(1, n + 1)))
    """, NPU_SIM_DEVICE_HEAP="shared")
    assert all_ok(results) == [f"{MAPPED} True\n"] * 2


def test_one_rank_wanting_staging_makes_the_whole_communicator_stage(runner, tmp_path):
    # A rank that cannot (here: will not) read its peers makes every rank
    # fall back together: the ranks of a collective must take the same path.
    results = run_ranks(runner, tmp_path, """
        direct = ctypes.c_uint32(7)
        ok(lib.npuSimHcclCommIsDirect(comm, ctypes.byref(direct)))
        n = 100_000
        p = upload(range(rank, rank + n), "i")
        ok(lib.HcclAllReduce(p, p, n, HCCL_INT32, HCCL_SUM, comm, stream))
        sim.sync()
        print(direct.value, download(p, n, "i") == [2 * i + 1 for i in range(n)])
    """, before_join="""
        if os.environ["RANK"] == "1":
            os.environ["NPU_SIM_HCCL_TRANSPORT"] = "staging"
    """)
    assert all_ok(results) == ["0 True\n", "0 True\n"]


# Rank 1 makes itself non-dumpable and rank 0 gives up CAP_SYS_PTRACE (a
# root test run has it), so that the kernel refuses rank 0's cross-memory
# reads of rank 1 with EPERM, as a hardened kernel does for everyone.
REFUSE_READS = """
import ctypes as _c
_libc = _c.CDLL(None, use_errno=True)
PR_SET_DUMPABLE, CAP_SYS_PTRACE = 4, 19
if os.environ["RANK"] == "1":
    assert _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
else:
    class _Header(_c.Structure):
        _fields_ = [("version", _c.c_uint32), ("pid", _c.c_int)]
    class _Data(_c.Structure):
        _fields_ = [("effective", _c.c_uint32), ("permitted", _c.c_uint32),
                    ("inheritable", _c.c_uint32)]
    header, data = _Header(0x20080522, 0), (_Data * 2)()
    assert _libc.capget(_c.byref(header), data) == 0
    data[0].effective &= ~(1 << CAP_SYS_PTRACE)
    assert _libc.capset(_c.byref(header), data) == 0
"""


def test_refused_cross_memory_reads_fall_back_to_staging(runner, tmp_path):
    results = run_ranks(runner, tmp_path, """
        direct = ctypes.c_uint32(7)
        ok(lib.npuSimHcclCommIsDirect(comm, ctypes.byref(direct)))
        n = 100_000
        send, recv = upload([rank + 0.25] * n, "f"), sim.malloc(4 * n * world)
        ok(lib.HcclAllGather(send, recv, n, HCCL_FP32, comm, stream))
        sim.sync()
        print(direct.value, download(recv, n * world, "f") == [0.25] * n + [1.25] * n)
    """, before_join=REFUSE_READS)
    assert all_ok(results) == ["0 True\n", "0 True\n"]


@pytest.mark.parametrize("heap", ["shared", "private"])
def test_a_peer_killed_while_others_read_it_fails_them_naming_it(runner, tmp_path, heap):
    # Rank 1 runs large all-reduces until it is killed; rank 0 keeps going
    # and must fail saying that rank 1 exited, whatever step it was at.
    ready = tmp_path / "ready"
    procs_code = f"""
        n = 16 << 20
        p = upload([1.0], "f")
        big = sim.malloc(4 * n)
        ok(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, stream))
        sim.sync()
        open({str(ready)!r} + str(rank), "w").close()
        for _ in range(400):
            # Once the failure is known, launching is refused, saying why.
            if lib.HcclAllReduce(big, big, n, HCCL_FP32, HCCL_SUM, comm, stream):
                print(sim.err())
                break
        print(lib.aclrtSynchronizeDevice(), sim.err())
    """
    code = Runner.PRELUDE.format(tests=str(TESTS_DIR)) + JOIN + textwrap.dedent(procs_code)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=runner.env(RANK=r, WORLD=2, ROOT_FILE=tmp_path / "root",
                                             NPU_SIM_DEVICE_HEAP=heap))
             for r in range(2)]
    deadline = time.time() + 60
    while not all((tmp_path / f"ready{r}").exists() for r in range(2)):
        assert time.time() < deadline and all(p.poll() is None for p in procs), (
            [p.communicate() for p in procs])
        time.sleep(0.01)
    time.sleep(0.3)  # well into the large all-reduces
    procs[1].send_signal(signal.SIGKILL)
    out, err = procs[0].communicate(timeout=60)
    procs[1].wait()
    assert procs[0].returncode == 0, err
    assert "507015 " in out and "HcclAllReduce" in out, out
    assert "rank 1 (process" in out and "exited before the collective completed" in out, out
