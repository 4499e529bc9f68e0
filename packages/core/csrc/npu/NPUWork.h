// Launching device work on a stream.
//
// On the simulator, device work is a host function run by the stream's worker
// thread, in stream order, asynchronously to the caller; inside it, device
// memory is reachable at (device address + host_access_offset()). This is how
// core's copy kernels and the ops package's kernels run. Real CANN runs
// compiled kernels instead and has no such entry point.
#pragma once

#include <cstdint>
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

// Records `message` as the error of the device work now running on this
// worker; the next synchronising call raises it. Unless every launch
// synchronises (ASCEND_LAUNCH_BLOCKING=1), that call is far from the line
// that launched the work, so the message says how to find that line.
TORCH_NPU_API void set_device_work_error(const char* message);

// Enqueues `fn()` (a callable, moved into the work item) as device work named
// `name` (static storage). An exception thrown by `fn` becomes a device-work
// error reported by the next synchronising call.
template <typename Fn>
uint64_t launch_host_work(const NPUStream& stream, const char* name, Fn&& fn) {
  using Closure = std::decay_t<Fn>;
  npuSimWork work{};
  work.name = name;
  // From here on the work item owns the closure: launch_work releases it
  // itself if the launch fails.
  work.ctx = new Closure(std::forward<Fn>(fn));
  work.run = [](void* ctx) -> aclError {
    try {
      (*static_cast<Closure*>(ctx))();
      return ACL_SUCCESS;
    } catch (const c10::Error& e) {
      set_device_work_error(e.what_without_backtrace());
    } catch (const std::exception& e) {
      set_device_work_error(e.what());
    }
    return ACL_ERROR_RT_AICORE_EXCEPTION;
  };
  work.release = [](void* ctx) { delete static_cast<Closure*>(ctx); };
  return launch_work(stream, work);
}

} // namespace c10_npu
