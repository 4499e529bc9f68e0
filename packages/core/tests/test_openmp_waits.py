"""Note [OpenMP teams of the host and device threads] (csrc/npu/OpenMPThreads.h):
a thread that launches device work gives back its idle OpenMP team while it
mostly waits for the device (Note [Release the team of a thread that waits
for the device]), always with TORCH_NPU_OPENMP_RELEASE_HOST_TEAM=1, never
with =0; and while other processes use the CPUs a parked team makes
libgomp's idle workers sleep.
Checked through the threads the process has, in fresh processes (each test's
thread counts start from a known state); timing is benchmarks/' business
(benchmarks/openmp_waits.py)."""

from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: F401

pytestmark = pytest.mark.skipif(
    not torch_npu._C._openmp_waits_adjustable() or torch.get_num_threads() < 2,
    reason="needs libgomp with omp_pause_resource_all and at least 2 intra-op threads")

_HELPERS = """
import os, time, torch, torch_npu

def threads():
    return len(os.listdir("/proc/self/task"))

def settle(expected):
    # A released team's workers exit just after the release returns.
    deadline = time.monotonic() + 10
    while threads() != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return threads()

def stable():
    # The thread count once nothing starts or ends any more.
    count = -1
    while count != threads():
        count = threads()
        time.sleep(0.05)
    return count

# No sampling of the CPUs' use: a loaded machine must not park a team
# while a test counts threads.
torch_npu._C._set_cpu_contention_for_testing(0)
x = torch.randn(1 << 22)
a = torch.randn(256, 256)
ref = a @ a
# The stream's worker thread and its OpenMP team exist from here on.
assert torch.equal((a.npu() @ a.npu()).cpu(), ref)
# torch.equal ran a parallel region here: the next launch gives back the team.
torch_npu._C._reset_openmp_release_for_testing()
torch.npu._sleep(0)
torch.npu.synchronize()
"""


_RELEASE = 'os.environ["TORCH_NPU_OPENMP_RELEASE_HOST_TEAM"] = "1"  # read at the first launch\n'


def test_a_launch_gives_back_the_launching_threads_idle_team(python_subprocess):
    # Opt-in (TORCH_NPU_OPENMP_RELEASE_HOST_TEAM=1): off by default, see the Note.
    helpers = _HELPERS.replace("torch_npu._C._set_cpu_contention_for_testing(0)\n",
                               "torch_npu._C._set_cpu_contention_for_testing(0)\n" + _RELEASE)
    result = python_subprocess(helpers + """
team = torch.get_num_threads()
before = stable()
expected = (x + x).clone()           # a parallel region: this thread's team starts
with_team = threads()
torch_npu._C._reset_openmp_release_for_testing()
torch.npu._sleep(0)                  # the launch releases it
torch.npu.synchronize()
after = settle(with_team - (team - 1))
again = x + x                        # the next parallel region starts a team again
print(team, before, with_team, after, torch.get_num_threads(), torch.equal(again, expected))
""")
    assert result.returncode == 0, result.stderr
    team, before, with_team, after, team_after, same = result.stdout.split()
    team, before, with_team, after = int(team), int(before), int(with_team), int(after)
    assert with_team == before + team - 1
    assert after == before
    assert int(team_after) == team  # torch.get_num_threads is kept
    assert same == "True"


def test_a_user_thread_count_is_kept_across_releases(python_subprocess):
    result = python_subprocess(_HELPERS.replace("torch.npu._sleep(0)\n", _RELEASE + "torch.npu._sleep(0)\n", 1) + """
torch.set_num_threads(2)
x + x
torch_npu._C._reset_openmp_release_for_testing()
torch.npu._sleep(0)
torch.npu.synchronize()
print(torch.get_num_threads())
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2"]


_RELEASED_OR_KEPT = """
import os, time, torch, torch_npu

def tasks():
    return set(os.listdir("/proc/self/task"))

torch_npu._C._set_cpu_contention_for_testing(0)
x = torch.randn(1 << 22)             # no parallel region on this thread yet
torch.npu._sleep(0)                  # the stream's worker and its team start
torch.npu.synchronize()
{setup}
before = tasks()
x + x                                # a parallel region: this thread's team starts
workers = tasks() - before
torch_npu._C._reset_openmp_release_for_testing()
torch.npu._sleep(0)                  # the launch releases it, or not
torch.npu.synchronize()
deadline = time.monotonic() + 3
while workers & tasks() and time.monotonic() < deadline:
    time.sleep(0.01)
print(torch.get_num_threads() - 1, len(workers), len(workers & tasks()))
"""


def _team_released(stdout: str) -> bool:
    # The workers x + x started (the team less this thread) are gone or not.
    team_workers, started, left = (int(v) for v in stdout.split())
    assert started == team_workers
    assert left in (0, started)
    return left == 0


@pytest.mark.parametrize("waits", [1, 0])
def test_by_default_a_thread_that_waits_for_the_device_gives_back_its_team(python_subprocess, waits):
    result = python_subprocess(_RELEASED_OR_KEPT.format(
        setup=f"torch_npu._C._set_waits_for_device_for_testing({waits})"))
    assert result.returncode == 0, result.stderr
    # Released while the thread waits for the device; kept while it is busy
    # on the host (host-bound work runs faster beside sleeping workers).
    assert _team_released(result.stdout) == bool(waits)


def test_release_host_team_0_keeps_the_team_of_a_waiting_thread(python_subprocess):
    result = python_subprocess(_RELEASED_OR_KEPT.format(setup="torch_npu._C._set_waits_for_device_for_testing(1)")
                               .replace("import os,", 'import os\nos.environ["TORCH_NPU_OPENMP_RELEASE_HOST_TEAM"] = "0"\nimport'))
    assert result.returncode == 0, result.stderr
    assert not _team_released(result.stdout)


def test_a_thread_that_slept_through_its_window_counts_as_waiting(python_subprocess):
    # Measured, not set: a thread that spent its last window (100 ms)
    # blocked has a CPU share near 0, far below the threshold of 1/4.
    result = python_subprocess(_RELEASED_OR_KEPT.format(setup="""
time.sleep(0.2)
torch.npu._sleep(0)                  # closes the window the start-up ran in
torch.npu.synchronize()
time.sleep(0.3)"""))
    assert result.returncode == 0, result.stderr
    assert _team_released(result.stdout)


def test_busy_cpus_make_idle_workers_sleep_and_free_cpus_spin(python_subprocess):
    result = python_subprocess(_HELPERS + """
cpus = len(os.sched_getaffinity(0))
base = stable()
torch_npu._C._set_cpu_contention_for_testing(1)
throttled, parked = torch_npu._C._openmp_waits_throttled(), settle(base + cpus)
same = torch.equal((a.npu() @ a.npu()).cpu(), ref)
torch_npu._C._set_cpu_contention_for_testing(0)
spinning, released = torch_npu._C._openmp_waits_throttled(), settle(base + 1)
torch_npu._C._set_cpu_contention_for_testing(-1)
print(cpus, base, throttled, parked, same, spinning, released)
""")
    assert result.returncode == 0, result.stderr
    cpus, base, throttled, parked, same, spinning, released = result.stdout.split()
    cpus, base = int(cpus), int(base)
    # The parked thread and its team of one thread per CPU.
    assert (throttled, int(parked)) == ("True", base + cpus)
    assert same == "True"
    # The team is released; the parked thread stays for the next time.
    assert (spinning, int(released)) == ("False", base + 1)
