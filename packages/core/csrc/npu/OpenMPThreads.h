#pragma once

#include "npu/Macros.h"

namespace c10_npu {

// Note [OpenMP teams of the host and device threads]
// Kernels run on a stream's worker thread with torch's intra-op OpenMP team
// (simulator README, Performance), beside the host thread that launches
// them. libgomp (torch's bundled one) lets an idle team's workers spin
// between parallel regions (~300k iterations, a few ms) only while the
// threads it manages in the whole process do not outnumber the CPUs;
// beyond that they spin ~100 iterations and sleep on a futex, and every
// parallel region of a kernel pays a wake-up. Spinning is what makes small
// kernels fast: benchmarks/compile_npu.py's eager training step takes
// 4.6-4.7 ms on 2 CPUs while the device's worker spins, 8.1-9.1 ms while
// it sleeps. Two things went wrong, both handled here:
//
// 1. A thread keeps the team of its first parallel region for good, and its
//    idle threads stay counted. After one parallel CPU op on the host
//    thread (on 2 CPUs: host + its worker + the device's worker = 3) every
//    kernel region slept: 8.7-9.1 ms per step for the rest of the process,
//    whatever GOMP_SPINCOUNT or OMP_WAIT_POLICY say. So a thread that
//    launches device work first gives back its idle team
//    (omp_pause_resource_all, OpenMP 5.0: the idle workers exit; the
//    thread's settings, torch.set_num_threads among them, stay). Without a
//    team the call costs nanoseconds; with one, ~30 us on a quiet 2-CPU VM
//    and the thread's next parallel CPU op starts its workers again
//    (~150 us), both several times that on a loaded machine. Releases are
//    rate-limited per thread (at most one per 10 ms + 20x the last one's
//    duration), so a program that alternates CPU ops and launches pays a
//    few percent at most. libgomp can release only the caller's own team.
//    While the waits are throttled (2.) nothing is released: the workers
//    sleep anyway, and on a loaded machine a release and the restart cost
//    milliseconds (a host op before every step: +1-3 ms per step).
//    Spinning device workers help device-bound work and hurt host-bound
//    work, whose host thread then shares its CPU with them. Measured on a
//    quiet 2-CPU machine: compile_npu.py's transformer step after a host op
//    4.7 ms with the release, 9.2 without; ops_throughput.py's small-GPT
//    step (small ops, host-bound) 8.3-9.1 ms with it, 5.6-5.7 without. So
//    by default a thread releases its team only while it mostly waits for
//    the device (Note [Release the team of a thread that waits for the
//    device]); TORCH_NPU_OPENMP_RELEASE_HOST_TEAM=1 releases always, =0
//    never (libgomp's own choice).
//
// Note [Release the team of a thread that waits for the device]
// Which of the two a program is shows in the launching thread's own CPU
// time: a thread that launches device-bound work spends most of its time
// blocked in synchronizations, one that launches host-bound work is busy
// (its own parallel CPU ops count as busy too). Each launching thread
// measures its CPU share of the wall time over windows of 100 ms (checked
// at launches, CLOCK_THREAD_CPUTIME_ID: ~50 ns once per window) and
// releases its idle team while the last window's share was below 1/4.
// Measured on 2 CPUs (loaded): compile_npu.py's transformer step 0.02-0.08,
// ops_throughput.py's small-GPT step 0.3-0.43 while the device's workers
// spin, 0.73 while they sleep, so releasing never pushes the latter below
// the threshold. Before, the release was opt-in, and after any parallel CPU
// op on the host thread (compile_npu.py's pointwise section runs Inductor's
// C++ kernel there) the transformer step took 8.1-9.2 ms instead of ~4.2
// for the rest of the process; the device's team then slept ~110 times per
// step instead of ~4 (voluntary context switches).
//
// 2. Spinning assumes the team owns its CPUs. When other processes keep
//    CPUs busy, a team member waits for one that is not running: the
//    spinning thread burns its time slice while the other waits for one.
//    With one competing busy process the step went from 4.7 to ~150 ms, the
//    device's two threads burning ~75 ms of CPU each per step; sleeping
//    workers (the throttled wait above) degrade far less. The team size
//    must stay (ATen's reductions combine per-thread partial results, so
//    the thread count shows in the bits), so when others use the CPUs the
//    wait is throttled instead: a parked thread runs one empty parallel
//    region on as many threads as there are CPUs and keeps its idle team,
//    which makes libgomp's count exceed the CPUs; it releases the team
//    once the CPUs are free again. Whether they are is sampled at most
//    every 100 ms by a launching thread: the machine's busy CPU time
//    (/proc/stat, steal included) minus this process's own (getrusage).
//    Once the CPUs others leave free are fewer than torch's intra-op thread
//    count by more than half a CPU, the waits are throttled (on 2 CPUs with
//    2 threads: others use more than half a CPU); once short by less than
//    a quarter for 1 s (ten samples in a row: other work comes in bursts,
//    and spinning on busy CPUs costs 10-30x where sleeping on free ones
//    costs ~2x), they spin again.
//
// Both act only if the process's OpenMP runtime is libgomp with
// omp_pause_resource_all (looked up at run time: another runtime or an
// older libgomp leaves things as they were), and not with
// TORCH_NPU_OPENMP_WAITS=0 (to compare, or where threads are placed by
// hand).

// Called by launch_work on the launching thread: releases its idle OpenMP
// team (rate-limited) and samples the CPUs' use (at most every 100 ms).
void prepare_launching_thread() noexcept;

// Testing. Whether both are on (libgomp, TORCH_NPU_OPENMP_WAITS).
TORCH_NPU_API bool openmp_waits_adjustable();
// The calling thread's next launch releases its idle team whatever the
// rate limit.
TORCH_NPU_API void reset_openmp_release_for_testing();
// Whether launching threads count as waiting for the device (Note [Release
// the team of a thread that waits for the device]): 0 or 1 holds for every
// thread, -1 measures again.
TORCH_NPU_API void set_waits_for_device_for_testing(int waits);
// Whether idle OpenMP workers are made to sleep (others use the CPUs);
// after set_cpu_contention_for_testing(0 or 1) the sampling stops and the
// given state holds (-1 resumes sampling). Waits for the change to apply.
TORCH_NPU_API bool openmp_waits_throttled();
TORCH_NPU_API void set_cpu_contention_for_testing(int contended);

} // namespace c10_npu
