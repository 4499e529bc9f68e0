#include "npu/NPUWork.h"

#include <atomic>
#include <string>
#include <type_traits>

#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUGraphsUtils.h"
#include "npu/OpenMPThreads.h"
#include "npu/WorkAccesses.h"
#include "npu/impl/AclInterface.h"

namespace c10_npu {

// The launch API stands for the simulator's work item: the same values.
static_assert(static_cast<uint32_t>(WorkFlags::Awaited) == NPU_SIM_WORK_AWAITED);
static_assert(static_cast<uint32_t>(WorkFlags::Untraced) == NPU_SIM_WORK_UNTRACED);
static_assert(kWorkSucceeded == ACL_SUCCESS);
static_assert(kWorkFailed == ACL_ERROR_RT_AICORE_EXCEPTION);
static_assert(std::is_same_v<WorkRunFn, decltype(npuSimWork::run)>);

namespace {

std::atomic<int> g_runs_for_testing{1};

// set_work_runs_for_testing's item: the launched one, run `runs` times.
struct RepeatedWork {
  WorkRunFn run;
  WorkReleaseFn release;
  void* ctx;
  int runs;
};

int32_t run_repeated(void* ctx) {
  const auto* work = static_cast<RepeatedWork*>(ctx);
  for (int i = 0; i < work->runs; ++i) {
    const int32_t status = work->run(work->ctx);
    if (status != kWorkSucceeded) {
      return status;
    }
  }
  return kWorkSucceeded;
}

void release_repeated(void* ctx) noexcept {
  const auto* work = static_cast<RepeatedWork*>(ctx);
  if (work->release != nullptr) {
    work->release(work->ctx);
  }
  delete work;
}

} // namespace

void set_work_runs_for_testing(int runs) {
  TORCH_CHECK(runs >= 1, "set_work_runs_for_testing: runs must be >= 1, got ", runs);
  g_runs_for_testing.store(runs, std::memory_order_relaxed);
}

intptr_t host_access_offset() {
  static const intptr_t offset = [] {
    intptr_t value = 0;
    if (acl::api().npuSimGetHostAccessOffset != nullptr) {
      NPU_CHECK(acl::api().npuSimGetHostAccessOffset(&value));
    }
    return value;
  }();
  return offset;
}

void set_device_work_error(const char* message, const std::string* launched_from) {
  std::string text = message;
  if (launched_from != nullptr && !launched_from->empty()) {
    text += " (launched from " + *launched_from + ")";
  } else if (!launch_blocking()) {
    // Raised at a later synchronisation, far from the launching line.
    text += " (set ASCEND_LAUNCH_BLOCKING=1 to see the Python line that launched it)";
  }
  acl::api().npuSimSetWorkError(text.c_str());
}

uint64_t launch_work(
    const NPUStream& stream, const char* name, WorkRunFn run, WorkReleaseFn release, void* ctx,
    WorkFlags flags) {
  const auto& api = acl::api();
  if (C10_UNLIKELY(api.npuSimLaunchWork == nullptr)) {
    if (release != nullptr) {
      release(ctx);
    }
    TORCH_CHECK(
        false, "Device work '", name,
        "' needs the NPU simulator's host-work launcher, which the CANN runtime "
        "does not have; this kernel has no CANN implementation yet.");
  }
  ensure_device_context(stream.device_index());
  // Note [OpenMP teams of the host and device threads]: the kernel's
  // parallel regions keep their workers spinning only if this thread's idle
  // team does not count against the CPUs and no other process uses them.
  prepare_launching_thread();
  if (const int runs = g_runs_for_testing.load(std::memory_order_relaxed); C10_UNLIKELY(runs != 1)) {
    ctx = new RepeatedWork{run, release, ctx, runs};
    run = &run_repeated;
    release = &release_repeated;
  }
  npuSimWork work{};
  work.name = name;
  work.run = run;
  work.release = release;
  work.ctx = ctx;
  work.flags = static_cast<uint32_t>(flags);
  uint64_t id = 0;
  aclError err;
  if (C10_UNLIKELY(race_check_enabled())) {
    // Note [Stream race detection] (simulator/race_detector.h): what the
    // item reads and writes, as its launcher declared it.
    std::vector<npuSimMemAccess> accesses;
    if (const auto* declared = WorkAccessScope::current()) {
      accesses.reserve(declared->size());
      for (const WorkAccess& a : *declared) {
        accesses.push_back(npuSimMemAccess{a.ptr, a.bytes, a.write ? 1u : 0u});
      }
    }
    err = api.npuSimLaunchWorkWithAccesses(stream.stream(), &work, accesses.data(), accesses.size(), &id);
  } else {
    err = api.npuSimLaunchWork(stream.stream(), &work, &id);
  }
  if (err != ACL_SUCCESS) {
    // Not enqueued: the work item is still ours to release.
    if (release != nullptr) {
      release(ctx);
    }
    NPU_CHECK(err);
  }
  // Captured work runs at replays: nothing to wait for now (Note [Stream
  // capture], NPUGraphsUtils.h).
  if (launch_blocking() && stream_capture_status(stream) == CaptureStatus::None) {
    stream.synchronize();
  }
  return id;
}

c10::DeviceIndex running_work_device() {
  int32_t device = -1;
  NPU_CHECK(acl::api().aclrtGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

} // namespace c10_npu
