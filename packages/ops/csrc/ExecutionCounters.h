// How many ops ran through each execution path of the ops package; read by
// torch_npu.ops.execution_counters() so users and tests can see whether
// anything ran synchronously.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace torch_npu_ops {

enum class ExecutionPath {
  // Output shapes from meta kernels; the CPU kernel runs as device work on
  // the stream; the host does not wait.
  DeviceAsync,
  // The result's shape or value depends on the data (or the op has no meta
  // kernel): the op still runs as device work, and the host waits for it.
  DeviceSync,
};

void count(ExecutionPath path, const std::string& op_name);

// An op queued by a dedicated kernel (FastPath.h) rather than the generic
// executor: DeviceAsync too, reported both in "device_async" and, on its
// own, in "fast_path".
void count_fast_path() noexcept;

// How the generic executor delivered a fresh result of an op without an
// out= form into its npu output (ResultPlacement.h).
enum class ResultDelivery {
  Copied, // the CPU kernel's result was copied into the output
  Placed, // the CPU kernel computed it in the output's memory
};
void count_result(ResultDelivery delivery) noexcept;

// A fast-path work item ran again (a replayed graph's) and kept what its
// runs share (Note [Prepared kernels of replayed work]): with the op's CPU
// kernel object (`Kernel`), or its CPU aliases only (`Aliases`); `Dropped`:
// an item gave its kernel object up after a run changed it.
enum class PreparedRuns { Kernel, Aliases, Dropped };
void count_prepared(PreparedRuns what) noexcept;

// {"device_async": n, "device_sync": n, "fast_path": n (part of device_async),
//  "results_copied": n, "results_placed": n, "replay_kernels": n,
//  "replay_aliases": n, "replay_kernels_dropped": n}
std::map<std::string, int64_t> counters();
// Op name -> how often it took the synchronous path.
std::map<std::string, int64_t> sync_ops();
void reset_counters();

} // namespace torch_npu_ops
