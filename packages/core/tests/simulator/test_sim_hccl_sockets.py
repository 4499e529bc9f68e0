"""The simulator's HCCL between machines: ranks on several machines meet over TCP.

Each rank process claims its own machine with NPU_SIM_HOST_ID (HOSTS lists
them by rank), so the job takes the socket transport as a job spanning
machines does (Note [Socket transport] in socket_transport.cpp); all of it
runs over 127.0.0.1 (HCCL_IF_IP). The results must be those of the
shared-memory transport, and failures must end every rank at once.
"""

import json
import signal
import socket
import subprocess
import sys
import textwrap

import pytest

from _simrunner import TESTS_DIR, Runner
from test_sim_hccl import SEND_RECV_ITEM, all_ok, run_ranks

LOOPBACK = {"HCCL_IF_IP": "127.0.0.1"}

# Every collective the simulated HCCL has, checked by value on each rank, in
# float32 and int32; plus large messages (more than the sockets' buffers).
EVERY_COLLECTIVE = SEND_RECV_ITEM + """
sockets = ctypes.c_uint32()
ok(lib.npuSimHcclCommUsesSockets(comm, ctypes.byref(sockets)))
assert sockets.value == 1
right, left = (rank + 1) % world, (rank - 1) % world
for hccl_type, code in ((HCCL_FP32, "f"), (HCCL_INT32, "i")):
    def values(r):
        return [r + 1, -(r + 2), 3 - r, 2]
    reduce_ops = {HCCL_SUM: sum, HCCL_MAX: max, HCCL_MIN: min}
    reduce_ops[HCCL_PROD] = lambda xs: xs[0] * xs[1] * (xs[2] if len(xs) > 2 else 1)
    for op, combine in reduce_ops.items():
        p = upload(values(rank), code)
        ok(lib.HcclAllReduce(p, p, 4, hccl_type, op, comm, stream))
        sim.sync()
        expected = [combine([values(r)[i] for r in range(world)]) for i in range(4)]
        assert download(p, 4, code) == expected, (op, download(p, 4, code), expected)
    send, recv = upload(values(rank), code), upload([-7] * 4, code)
    ok(lib.HcclReduce(send, recv, 4, hccl_type, HCCL_SUM, 1, comm, stream))
    b = upload([rank * 10 + i for i in range(3)], code)
    ok(lib.HcclBroadcast(b, 3, hccl_type, world - 1, comm, stream))
    g_in, g_out = upload([rank, rank * 100], code), upload([0] * 2 * world, code)
    ok(lib.HcclAllGather(g_in, g_out, 2, hccl_type, comm, stream))
    rs_in = upload([rank + 10 * j for j in range(2 * world)], code)
    rs_out = upload([0, 0], code)
    ok(lib.HcclReduceScatter(rs_in, rs_out, 2, hccl_type, HCCL_SUM, comm, stream))
    ok(lib.HcclBarrier(comm, stream))
    a_in = upload([rank * 100 + j for j in range(2 * world)], code)
    a_out = upload([-1] * 2 * world, code)
    ok(lib.HcclAlltoAll(a_in, 2, hccl_type, a_out, 2, hccl_type, comm, stream))
    # Uneven: rank s sends s + d + 1 elements of value 10 * s + d to rank d.
    u64 = ctypes.c_uint64 * world
    send_counts = [rank + d + 1 for d in range(world)]
    sdispls = [sum(send_counts[:d]) for d in range(world)]
    v_in = upload([10 * rank + d for d in range(world) for _ in range(send_counts[d])], code)
    recv_counts = [s + rank + 1 for s in range(world)]
    rdispls = [sum(recv_counts[:s]) for s in range(world)]
    v_out = upload([-1] * sum(recv_counts), code)
    ok(lib.HcclAlltoAllV(v_in, u64(*send_counts), u64(*sdispls), hccl_type, v_out,
                         u64(*recv_counts), u64(*rdispls), hccl_type, comm, stream))
    sim.sync()
    assert download(recv, 4, code) == (
        [sum(values(r)[i] for r in range(world)) for i in range(4)] if rank == 1 else [-7] * 4)
    assert download(b, 3, code) == [(world - 1) * 10 + i for i in range(3)]
    assert download(g_out, 2 * world, code) == [x for r in range(world) for x in (r, r * 100)]
    assert download(rs_out, 2, code) == [sum(r + 10 * (2 * rank + i) for r in range(world))
                                         for i in range(2)]
    assert download(a_out, 2 * world, code) == [s * 100 + 2 * rank + i
                                                for s in range(world) for i in range(2)]
    assert download(v_out, sum(recv_counts), code) == [
        10 * s + rank for s in range(world) for _ in range(recv_counts[s])]
    # Send and receive around the ring (rank 0 first), then a batch in which
    # every rank sends first, to both neighbours and itself.
    mine, got = upload([rank * 1000 + i for i in range(5)], code), upload([-1] * 5, code)
    if rank == 0:
        ok(lib.HcclSend(mine, 5, hccl_type, right, comm, stream))
        ok(lib.HcclRecv(got, 5, hccl_type, left, comm, stream))
    else:
        ok(lib.HcclRecv(got, 5, hccl_type, left, comm, stream))
        ok(lib.HcclSend(mine, 5, hccl_type, right, comm, stream))
    from_left, from_right, to_self = (upload([0] * 3, code) for _ in range(3))
    three = upload([rank] * 3, code)
    items, count = batch((HCCL_SEND, three, 3, hccl_type, right),
                         (HCCL_SEND, three, 3, hccl_type, left),
                         (HCCL_SEND, three, 3, hccl_type, rank),
                         (HCCL_RECV, from_left, 3, hccl_type, left),
                         (HCCL_RECV, from_right, 3, hccl_type, right),
                         (HCCL_RECV, to_self, 3, hccl_type, rank))
    ok(lib.HcclBatchSendRecv(items, count, comm, stream))
    sim.sync()
    assert download(got, 5, code) == [left * 1000 + i for i in range(5)]
    assert download(from_left, 3, code) == [left] * 3
    assert download(from_right, 3, code) == [right] * 3
    assert download(to_self, 3, code) == [rank] * 3
# Large: every rank sends every other 2 MB at once.
n = 500_000
big = upload([float(rank + (i % 7)) for i in range(n)], "f")
ok(lib.HcclAllReduce(big, big, n, HCCL_FP32, HCCL_SUM, comm, stream))
sim.sync()
assert download(big, n, "f") == [float(sum(r + (i % 7) for r in range(world))) for i in range(n)]
print("ok")
"""


@pytest.mark.parametrize("hosts", ["node-a,node-b", "node-a,node-a,node-b", "a,b,c"])
def test_every_collective_over_sockets(runner, tmp_path, hosts):
    # "node-a,node-a,node-b": rank 1 shares the root info's machine, so it
    # starts joining through shared memory and learns from rank 0 to switch.
    world = len(hosts.split(","))
    outs = all_ok(run_ranks(runner, tmp_path, EVERY_COLLECTIVE, world=world, HOSTS=hosts,
                            timeout=120, **LOOPBACK))
    assert outs == ["ok\n"] * world


def test_mismatched_collectives_fail_every_rank_naming_both_sides(runner, tmp_path):
    results = run_ranks(runner, tmp_path, """
        p = upload([1.0] * 8, "f")
        ok(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, stream))
        ok(lib.HcclAllReduce(p, p, 4 if rank == 0 else 8, HCCL_FP32, HCCL_SUM, comm, stream))
        print(lib.aclrtSynchronizeDevice(), sim.err())
        print(lib.HcclAllReduce(p, p, 4, HCCL_FP32, HCCL_SUM, comm, stream), sim.err())
    """, world=3, HOSTS="a,b,c", **LOOPBACK)
    for out in all_ok(results):
        failure, refusal = out.splitlines()
        assert failure.startswith("507015 "), failure  # ACL_ERROR_RT_AICORE_EXCEPTION
        assert ("rank 0 called HcclAllReduce(count=4, float32, sum) as collective #2, rank 1 "
                "called HcclAllReduce(count=8, float32, sum) as collective #2: every rank must "
                "call the same collectives") in failure, failure
        assert refusal.startswith("1 HcclAllReduce: the communicator was aborted"), refusal


def test_a_receive_that_does_not_match_its_send_fails(runner, tmp_path):
    results = run_ranks(runner, tmp_path, """
        p = upload([1.0] * 8, "f")
        if rank == 0:
            ok(lib.HcclSend(p, 4, HCCL_FP32, 1, comm, stream))
        else:
            ok(lib.HcclRecv(p, 5, HCCL_FP32, 0, comm, stream))
        print(lib.aclrtSynchronizeDevice(), sim.err())
    """, HOSTS="a,b", **LOOPBACK)
    _, receiver = all_ok(results)
    assert ("rank 0 sends 4 elements of HCCL_DATA_TYPE_FP32, but rank 1 receives 5 elements of "
            "HCCL_DATA_TYPE_FP32: a "
            "receive must match its send") in receiver, receiver


def test_a_killed_peer_fails_the_others_at_once_naming_it(runner, tmp_path):
    # The exec timeout is ten minutes and the test's a minute: the survivors
    # fail because the kernel closed the killed rank's connections.
    results = run_ranks(runner, tmp_path, """
        p = upload([1.0], "f")
        ok(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, stream))
        sim.sync()
        if rank == 2:
            os.kill(os.getpid(), 9)
        ok(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, stream))
        print(lib.aclrtSynchronizeDevice(), sim.err())
    """, world=3, HOSTS="a,b,c", HCCL_EXEC_TIMEOUT=600, timeout=60, **LOOPBACK)
    assert results[2].returncode == -signal.SIGKILL
    for r in results[:2]:
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("507015 "), r.stdout
        assert "rank 2 (on c) exited or closed its connection" in r.stdout, r.stdout


def test_a_late_peer_times_out_naming_it(runner, tmp_path):
    results = run_ranks(runner, tmp_path, """
        p = upload([1.0], "f")
        if rank == 1:
            time.sleep(3)
        ok(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, stream))
        print(lib.aclrtSynchronizeDevice(), sim.err())
    """, HOSTS="a,b", HCCL_EXEC_TIMEOUT=1, timeout=30, **LOOPBACK)
    first, late = all_ok(results)
    assert first.startswith("507015 "), first
    assert ("HcclAllReduce(count=1, float32, sum), collective #1 of this communicator timed out "
            "after 1 s waiting for rank(s) 1 (rank 0 of 2)") in first, first
    assert "The limit is HCCL_EXEC_TIMEOUT" in first
    # Rank 1 arrives to find rank 0 gone from the collective.
    assert late.startswith("507015 ") and "rank 0 " in late, late


def test_joining_times_out_when_a_rank_never_registers(runner, tmp_path):
    # One process makes the root info and joins as rank 1 of 2 "elsewhere":
    # rank 0 never comes, and the join ends after HCCL_CONNECT_TIMEOUT,
    # naming it (Note [Who did not register]).
    result = runner.run(textwrap.dedent("""
        sim.set_device(0)
        root = ctypes.create_string_buffer(HCCL_ROOT_INFO_BYTES)
        assert lib.HcclGetRootInfo(root) == HCCL_SUCCESS
        os.environ["NPU_SIM_HOST_ID"] = "node-b"
        comm = ctypes.c_void_p()
        print(lib.HcclCommInitRootInfo(2, root, 1, ctypes.byref(comm)), sim.err())
    """), HCCL_CONNECT_TIMEOUT=1, **LOOPBACK)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("9 HcclCommInitRootInfo: joining the communicator timed out "
                                    "after 1 s (rank 1 of 2) waiting for every rank to register"), \
        result.stdout
    assert ": rank(s) 0 of 2 did not register (1 did). The limit is HCCL_CONNECT_TIMEOUT seconds" \
        in result.stdout, result.stdout


def test_a_rank_table_of_two_servers_meets_over_sockets(runner, tmp_path):
    # HcclCommInitClusterInfo with ranks on two servers (127.0.0.1 and
    # 127.0.0.2, both this machine's loopback): rank 0 runs the rendezvous
    # server on its server's address, port HCCL_IF_BASE_PORT.
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"status": "completed", "server_list": [
        {"server_id": "127.0.0.1", "device": [{"device_id": "0", "rank_id": "0"},
                                              {"device_id": "1", "rank_id": "1"}]},
        {"server_id": "127.0.0.2", "device": [{"device_id": "0", "rank_id": "2"}]}]}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = Runner.PRELUDE.format(tests=str(TESTS_DIR)) + textwrap.dedent(f"""
        import array
        rank = int(os.environ["RANK"])
        sim.set_device([0, 1, 0][rank])
        comm = ctypes.c_void_p()
        assert lib.HcclCommInitClusterInfo({str(table)!r}.encode(), rank,
                                           ctypes.byref(comm)) == HCCL_SUCCESS, sim.err()
        sockets = ctypes.c_uint32()
        assert lib.npuSimHcclCommUsesSockets(comm, ctypes.byref(sockets)) == HCCL_SUCCESS
        p = sim.malloc(8)
        sim.h2d(p, array.array("f", [rank + 1.0, 2.0 * rank]).tobytes(), sync=True)
        assert lib.HcclAllReduce(p, p, 2, HCCL_FP32, HCCL_SUM, comm, None) == HCCL_SUCCESS
        sim.sync()
        out = array.array("f")
        out.frombytes(sim.d2h(p, 8, sync=True).raw)
        print(sockets.value, out.tolist())
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=runner.env(RANK=r, HCCL_IF_BASE_PORT=port))
             for r in range(3)]
    try:
        results = [proc.communicate(timeout=60) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    assert [out for out, _ in results] == ["1 [6.0, 6.0]\n"] * 3, results


# Every rank joins on device 0 of its process, whatever JOIN asks for.
ON_DEVICE_0 = """
_set_device = sim.set_device
sim.set_device = lambda device: _set_device(0)
"""


def test_two_ranks_on_one_device_of_a_machine_are_refused_when_the_job_spans_machines(runner, tmp_path):
    # Note [One device per rank of a machine]: ranks 0 and 1 run on machine
    # "a", both on its device 0; rank 2 on machine "b", so all meet over TCP.
    results = run_ranks(runner, tmp_path, "print('joined')", world=3, HOSTS="a,a,b",
                        before_join=ON_DEVICE_0, **LOOPBACK)
    for rank, r in enumerate(results):
        assert r.returncode != 0 and "joined" not in r.stdout, (rank, r.stdout)
        assert ("ranks 0 and 1 of the communicator both use the device with physical id 0 of "
                "machine a: each rank of a machine needs a device of its own") in r.stderr, (rank, r.stderr)


def test_ranks_of_two_machines_may_each_use_their_device_0(runner, tmp_path):
    outs = all_ok(run_ranks(runner, tmp_path, """
        p = upload([rank + 1.0], "f")
        ok(lib.HcclAllReduce(p, p, 1, HCCL_FP32, HCCL_SUM, comm, stream))
        sim.sync()
        print(download(p, 1, "f"))
    """, HOSTS="a,b", before_join=ON_DEVICE_0, **LOOPBACK))
    assert outs == ["[3.0]\n", "[3.0]\n"]
