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
// Which of the two a program is shows in the launching thread's own time:
// a thread that launches device-bound work spends most of it blocked in
// synchronizations, one that launches host-bound work is on a CPU or
// waiting for one (its own parallel CPU ops count as busy too). Each
// launching thread measures, over windows of 100 ms (checked at launches;
// one read of /proc/thread-self/schedstat per window), the share of the
// wall time it did not block: its run time plus its run-queue time, since
// on busy CPUs a thread that never blocks gets only a fraction of one. It
// releases its idle team while the last window's share was below 1/4; a
// thread starts as busy. Measured on the shared 2-CPU machine (load 5-8,
// waits not throttled): compile_npu.py's transformer step 0.03-0.17,
// ops_throughput.py's small-GPT step 0.78-0.96 beside sleeping workers.
// Before, the release was opt-in, and after any parallel CPU op on the
// host thread (compile_npu.py's pointwise section runs Inductor's C++
// kernel there) the transformer step took 8.1-9.2 ms instead of ~4.2 for
// the rest of the process: the device's team then switched context ~110
// times per step instead of 2-14 (benchmarks/openmp_waits.py, regime
// pointwise).
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
