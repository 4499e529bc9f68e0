// Launching device work on a stream: the one launch path of torch-npu.
//
// On the simulator, device work is a host function run by the stream's worker
// thread, in stream order, asynchronously to the caller; inside it, device
// memory is reachable at (device address + host_access_offset()). Core's copy
// kernels, the ops package's kernels and whatever comes later launch their
// work here and nowhere else: the runtime's own structs (the simulator's
// work item, its flags) stay behind this header, so a change to how work is
// launched, captured or traced is a change to core only. Real CANN runs
// compiled kernels instead and has no such entry point.
//
// Note [Device work items run many times]
// A work item's `run` may be called any number of times before its
// `release`, which is called exactly once: a captured graph keeps the items
// of its capture and runs them at every replay. So a run reads its
// arguments and never consumes them (no moving a captured tensor or stack
// out), leaves its captured state as it found it, and reads what must
// change between runs (a generator's offset, an event's generation) when
// it runs. Every launcher in this tree keeps that contract; the tests
// test_work_items.py (core) and test_work_items_rerun.py (ops) run each kind
// of item twice (set_work_runs_for_testing).
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include "npu/Macros.h"
#include "npu/NPUStream.h"
#include "npu/WorkStorage.h"

namespace c10_npu {

// Offset from a device address to the address device work may dereference
// (non-zero when the simulator's memory checker guards device memory).
TORCH_NPU_API intptr_t host_access_offset();

template <typename T>
inline T* host_access(T* device_ptr) {
  return reinterpret_cast<T*>(
      reinterpret_cast<intptr_t>(device_ptr) + host_access_offset());
}

// How a launch is to be run.
enum class WorkFlags : uint32_t {
  None = 0,
  // The launcher synchronises with the stream right after the launch (an op
  // whose result the host needs at once): the runtime may run the item on
  // the synchronising thread, still in stream order, instead of waking the
  // stream's worker.
  Awaited = 1u << 0,
  // Not device work but the runtime's own bookkeeping on the stream (mstx's
  // device timestamps, NPUMstx.h): runs in stream order, leaves no activity
  // record, so profiles show only the work the program launched.
  Untraced = 1u << 1,
};

// What a work item's run function returns: the runtime's error codes.
// kWorkFailed (ACL_ERROR_RT_AICORE_EXCEPTION, as a failed kernel on CANN):
// set_device_work_error was called with the reason, and the next
// synchronising call on the stream or device raises it.
constexpr int32_t kWorkSucceeded = 0;
constexpr int32_t kWorkFailed = 507015;

using WorkRunFn = int32_t (*)(void* ctx);
using WorkReleaseFn = void (*)(void* ctx) noexcept;

// Enqueues `run(ctx)` as device work named `name` (static storage) on
// `stream`; `release(ctx)` (may be null) is called exactly once when the
// runtime no longer needs the item, including when this call throws. See
// Note [Device work items run many times]. Returns the launch's
// process-unique id (what activity records name). Honours
// ASCEND_LAUNCH_BLOCKING.
TORCH_NPU_API uint64_t launch_work(
    const NPUStream& stream,
    const char* name,
    WorkRunFn run,
    WorkReleaseFn release,
    void* ctx,
    WorkFlags flags = WorkFlags::None);

// Where the host launched a work item ("train.py:42"), named in the work's
// error message. Core does not look at the Python stack; a launcher that
// can (the ops package) captures it. Shared: launches from one line share
// one string, and the work item may outlive the launcher's cache entry.
using LaunchSite = std::shared_ptr<const std::string>;

// Records `message` as the error of the device work now running on this
// worker; the next synchronising call raises it. That call is usually far
// from the line that launched the work: the message names `launched_from`
// when the launcher captured it, and otherwise (unless every launch
// synchronises, ASCEND_LAUNCH_BLOCKING=1) says how to find the line.
TORCH_NPU_API void set_device_work_error(const char* message, const std::string* launched_from = nullptr);

// Runs a work item's body, turning an exception into its device-work error.
template <typename Body>
int32_t run_work_body(Body& body, const std::string* launched_from) noexcept {
  try {
    body();
    return kWorkSucceeded;
  } catch (const c10::Error& e) {
    set_device_work_error(e.what_without_backtrace(), launched_from);
  } catch (const std::exception& e) {
    set_device_work_error(e.what(), launched_from);
  }
  return kWorkFailed;
}

// Enqueues `fn()` (a callable, moved into the work item; called once per run
// of the item) as device work named `name`. An exception thrown by `fn`
// becomes a device-work error reported by the next synchronising call,
// naming `site` if given.
template <typename Fn>
uint64_t launch_host_work(
    const NPUStream& stream, const char* name, Fn&& fn, LaunchSite site = nullptr,
    WorkFlags flags = WorkFlags::None) {
  struct Closure {
    std::decay_t<Fn> fn;
    LaunchSite site;
  };
  auto* closure = new Closure{std::forward<Fn>(fn), std::move(site)};
  return launch_work(
      stream, name,
      [](void* ctx) -> int32_t {
        auto* c = static_cast<Closure*>(ctx);
        return run_work_body(c->fn, c->site.get());
      },
      [](void* ctx) noexcept { delete static_cast<Closure*>(ctx); }, closure, flags);
}

// As launch_host_work for the hottest launchers (one item per small op):
// constructs `Work{args...}` in recycled memory (WorkStorage.h) instead of
// a heap allocation. `Work` is callable and has a `site` member (a
// LaunchSite, may be null).
template <typename Work, typename... Args>
uint64_t launch_recycled_work(const NPUStream& stream, const char* name, WorkFlags flags, Args&&... args) {
  static_assert(alignof(Work) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  void* storage = allocate_work_storage(sizeof(Work));
  Work* work;
  try {
    work = new (storage) Work{std::forward<Args>(args)...};
  } catch (...) {
    release_work_storage(storage, sizeof(Work));
    throw;
  }
  return launch_work(
      stream, name,
      [](void* ctx) -> int32_t {
        auto* w = static_cast<Work*>(ctx);
        return run_work_body(*w, w->site.get());
      },
      [](void* ctx) noexcept {
        static_cast<Work*>(ctx)->~Work();
        release_work_storage(ctx, sizeof(Work));
      },
      work, flags);
}

// Testing Note [Device work items run many times]: from now on the runtime
// runs every item launched through launch_work `runs` times in a row
// (1: normal), as replays of a captured graph would.
TORCH_NPU_API void set_work_runs_for_testing(int runs);

// The device of the work running on the calling thread (a stream's worker,
// or a thread running awaited work): where memory that work allocates
// belongs. Outside device work, the runtime's current device of the thread.
TORCH_NPU_API c10::DeviceIndex running_work_device();

} // namespace c10_npu
