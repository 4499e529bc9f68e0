#include "npu/NPUFunctions.h"

#include <pthread.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <vector>

#include <c10/util/Exception.h>

#include "npu/NPUException.h"
#include "npu/impl/AclInterface.h"
#include "npu/impl/RuntimeFinalize.h"

namespace c10_npu {
namespace {

std::atomic<bool> g_initialized{false};
std::atomic<bool> g_in_bad_fork{false};
std::atomic<bool> g_finalized{false};
std::once_flag g_init_flag;
std::mutex g_device_init_mutex;
std::array<std::atomic<bool>, kMaxDevices> g_device_initialized{};

// call_after_init's callbacks until the runtime is initialised.
std::mutex g_after_init_mutex;
std::vector<std::function<void()>> g_after_init;

void run_after_init_callbacks() {
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard<std::mutex> guard(g_after_init_mutex);
    callbacks.swap(g_after_init);
  }
  for (auto& callback : callbacks) {
    callback();
  }
}

// The thread's current device as torch sees it, and the device the runtime
// was last told about on this thread (acl contexts are per thread).
thread_local c10::DeviceIndex tls_current_device = 0;
thread_local c10::DeviceIndex tls_runtime_device = -1;

void on_fork_child() {
  if (g_initialized.load()) {
    g_in_bad_fork.store(true);
  }
}

c10::DeviceIndex query_device_count() noexcept {
  try {
    uint32_t count = 0;
    if (acl::api().aclrtGetDeviceCount(&count) != ACL_SUCCESS) {
      return 0;
    }
    return static_cast<c10::DeviceIndex>(
        std::min<uint32_t>(count, static_cast<uint32_t>(kMaxDevices)));
  } catch (...) {
    return 0;
  }
}

} // namespace

c10::DeviceIndex device_count() noexcept {
  static const c10::DeviceIndex count = query_device_count();
  return count;
}

void check_device_index(c10::DeviceIndex index) {
  const auto count = device_count();
  if (count == 0) {
    // No devices may mean the runtime failed to load: raise that error,
    // which says how to fix it, rather than an index error.
    acl::api();
  }
  TORCH_CHECK(
      index >= 0 && index < count, "Invalid NPU device index npu:",
      static_cast<int>(index), ": this process sees ", static_cast<int>(count),
      count == 0 ? " NPU devices" : " NPU device(s)",
      count == 0 ? std::string()
                 : " (npu:0 to npu:" + std::to_string(count - 1) + ")",
      ". Use an index below torch.npu.device_count(); the visible devices are "
      "set by ASCEND_RT_VISIBLE_DEVICES (and, on the simulator, "
      "NPU_SIM_DEVICE_COUNT).");
}

std::string runtime_library() {
  return acl::backend_info().library;
}

bool is_in_bad_fork() {
  return g_in_bad_fork.load();
}

bool is_initialized() {
  return g_initialized.load() && !g_in_bad_fork.load() && !g_finalized.load();
}

void lazy_init() {
  TORCH_CHECK(
      !g_in_bad_fork.load(),
      "Cannot re-initialize NPU in forked subprocess. To use NPU with "
      "multiprocessing, you must use the 'spawn' start method");
  TORCH_CHECK(
      !g_finalized.load(std::memory_order_acquire),
      "The NPU runtime of this process was finalized (torch_npu::finalize_npu) and "
      "cannot be used again: use npu devices only between torch_npu::init_npu and "
      "torch_npu::finalize_npu.");
  if (g_initialized.load(std::memory_order_acquire)) {
    return;
  }
  bool initialised_here = false;
  std::call_once(g_init_flag, [&initialised_here] {
    const aclError err = acl::api().aclInit(nullptr);
    if (err != ACL_SUCCESS && err != ACL_ERROR_REPEAT_INITIALIZE) {
      NPU_CHECK(err);
    }
    pthread_atfork(nullptr, nullptr, &on_fork_child);
    g_initialized.store(true, std::memory_order_release);
    initialised_here = true;
  });
  // Outside call_once: a callback that takes the GIL must not hold the once
  // flag another thread may wait on with the GIL held.
  if (initialised_here) {
    run_after_init_callbacks();
  }
}

void call_after_init(std::function<void()> callback) {
  {
    std::lock_guard<std::mutex> guard(g_after_init_mutex);
    if (!g_initialized.load(std::memory_order_acquire)) {
      g_after_init.push_back(std::move(callback));
      return;
    }
  }
  callback();
}

void ensure_device_context(c10::DeviceIndex index) {
  if (C10_LIKELY(
          tls_runtime_device == index &&
          !g_in_bad_fork.load(std::memory_order_relaxed) &&
          !g_finalized.load(std::memory_order_relaxed))) {
    return;
  }
  lazy_init();
  check_device_index(index);
  NPU_CHECK(acl::api().aclrtSetDevice(index));
  tls_runtime_device = index;
  if (!g_device_initialized[index].load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> guard(g_device_init_mutex);
    g_device_initialized[index].store(true, std::memory_order_release);
  }
}

bool is_device_initialized(c10::DeviceIndex index) {
  return index >= 0 && index < kMaxDevices &&
      g_device_initialized[index].load(std::memory_order_acquire);
}

c10::DeviceIndex current_device() {
  return tls_current_device;
}

void set_device(c10::DeviceIndex index) {
  check_device_index(index);
  ensure_device_context(index);
  tls_current_device = index;
}

c10::DeviceIndex exchange_device(c10::DeviceIndex index) {
  const auto previous = tls_current_device;
  if (index >= 0 && index != previous) {
    set_device(index);
  }
  return previous;
}

void device_synchronize(c10::DeviceIndex index) {
  if (index < 0) {
    index = current_device();
  }
  check_device_index(index);
  ensure_device_context(index);
  NPU_CHECK(acl::api().aclrtSynchronizeDevice());
}

void finalize_runtime() {
  if (!g_initialized.load(std::memory_order_acquire) || g_in_bad_fork.load() ||
      g_finalized.exchange(true)) {
    return;
  }
  // Every device is released and the runtime finalized even when a device's
  // queued work failed; that failure is raised afterwards.
  std::exception_ptr work_failure;
  {
    std::lock_guard<std::mutex> guard(g_device_init_mutex);
    const auto& api = acl::api();
    for (c10::DeviceIndex index = 0; index < kMaxDevices; ++index) {
      if (!g_device_initialized[index].load(std::memory_order_acquire)) {
        continue;
      }
      NPU_CHECK(api.aclrtSetDevice(index));
      try {
        NPU_CHECK(api.aclrtSynchronizeDevice());
      } catch (...) {
        if (!work_failure) {
          work_failure = std::current_exception();
        }
      }
      NPU_CHECK(api.aclrtResetDevice(index));
      g_device_initialized[index].store(false, std::memory_order_release);
    }
    NPU_CHECK(api.aclFinalize());
  }
  tls_runtime_device = -1;
  if (work_failure) {
    std::rethrow_exception(work_failure);
  }
}

bool launch_blocking() {
  static const bool blocking = [] {
    const char* env = std::getenv("ASCEND_LAUNCH_BLOCKING");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }();
  return blocking;
}

} // namespace c10_npu
