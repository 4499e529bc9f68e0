// Launching device work on a stream.
//
// On the simulator, device work is a host function run by the stream's worker
// thread, in stream order, asynchronously to the caller; inside it, device
// memory is reachable at (device address + host_access_offset()). This is how
// core's copy kernels and the ops package's kernels run. Real CANN runs
// compiled kernels instead and has no such entry point.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include <c10/util/Exception.h>

#include "npu/AclInterface.h"
#include "npu/Macros.h"
#include "npu/NPUStream.h"

namespace c10_npu {

// Offset from a device address to the address device work may dereference
// (non-zero when the simulator's memory checker guards device memory).
TORCH_NPU_API intptr_t host_access_offset();

template <typename T>
inline T* host_access(T* device_ptr) {
  return reinterpret_cast<T*>(
      reinterpret_cast<intptr_t>(device_ptr) + host_access_offset());
}

// Enqueues a raw work item; returns its id. Honours ASCEND_LAUNCH_BLOCKING.
TORCH_NPU_API uint64_t launch_work(const NPUStream& stream, const npuSimWork& work);

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
aclError run_work_body(Body& body, const std::string* launched_from) noexcept {
  try {
    body();
    return ACL_SUCCESS;
  } catch (const c10::Error& e) {
    set_device_work_error(e.what_without_backtrace(), launched_from);
  } catch (const std::exception& e) {
    set_device_work_error(e.what(), launched_from);
  }
  return ACL_ERROR_RT_AICORE_EXCEPTION;
}

// Enqueues `fn()` (a callable, moved into the work item) as device work named
// `name` (static storage). An exception thrown by `fn` becomes a device-work
// error reported by the next synchronising call, naming `site` if given.
// `flags`: NPU_SIM_WORK_AWAITED if the caller synchronizes with the stream
// right after (see npu_sim_ext.h).
template <typename Fn>
uint64_t launch_host_work(
    const NPUStream& stream, const char* name, Fn&& fn, LaunchSite site = nullptr, uint32_t flags = 0) {
  struct Closure {
    std::decay_t<Fn> fn;
    LaunchSite site;
  };
  npuSimWork work{};
  work.name = name;
  work.flags = flags;
  // From here on the work item owns the closure: launch_work releases it
  // itself if the launch fails.
  work.ctx = new Closure{std::forward<Fn>(fn), std::move(site)};
  work.run = [](void* ctx) -> aclError {
    auto* closure = static_cast<Closure*>(ctx);
    return run_work_body(closure->fn, closure->site.get());
  };
  work.release = [](void* ctx) { delete static_cast<Closure*>(ctx); };
  return launch_work(stream, work);
}

} // namespace c10_npu
