#include "runtime.h"

#include <pthread.h>

#include <cstdlib>

#include "errors.h"
#include "race_detector.h"
#include "stream.h"
#include "util.h"

namespace npu_sim {
namespace {

// Plain atomics: trivially destructible, usable until the very end.
std::atomic<bool> g_exiting{false};
std::atomic<bool> g_device_initialized{false};
std::atomic<bool> g_forked_child{false};
std::atomic<Runtime*> g_runtime{nullptr};

// How long exit waits for workers to finish the item they are running.
constexpr int64_t kExitJoinBudgetNs = 500'000'000;

void onForkChild() {
  // Threads do not survive fork() and device memory is not inherited
  // (MADV_DONTFORK), so a child that inherits an initialised simulator
  // must neither use it nor wait for its threads. Only flags are touched
  // here: another thread may have held any lock at the fork.
  if (g_device_initialized.load(std::memory_order_relaxed)) {
    g_forked_child.store(true, std::memory_order_relaxed);
  }
}

void onExit() {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr || g_forked_child.load(std::memory_order_relaxed)) {
    return;
  }
  g_exiting.store(true, std::memory_order_seq_cst);
  std::vector<Stream*> streams;
  for (uint32_t d = 0; d < rt->deviceCount(); ++d) {
    if (rt->device(d).initialized()) {
      auto more = rt->device(d).retainStreams();
      streams.insert(streams.end(), more.begin(), more.end());
    }
  }
  for (Stream* s : streams) {
    s->requestExit();
  }
  const int64_t deadline = nowNs() + kExitJoinBudgetNs;
  for (Stream* s : streams) {
    s->finishExit(deadline);
  }
  // The streams stay allocated: detached workers may still use them.
}

} // namespace

bool processExiting() {
  return g_exiting.load(std::memory_order_relaxed);
}

void markProcessExiting() {
  g_exiting.store(true, std::memory_order_seq_cst);
}

void noteDeviceInitialized() {
  g_device_initialized.store(true, std::memory_order_relaxed);
}

Runtime& Runtime::get() {
  // Never deleted: see the header.
  static Runtime* const instance = [] {
    auto* rt = new Runtime();
    g_runtime.store(rt, std::memory_order_release);
    return rt;
  }();
  return *instance;
}

Runtime::Runtime() : config_(npu_sim::config()) {
  race::applyConfig();
  if (!reserveAddressSpace(config_.device_count, config_.capacity, config_.checker, &layout_,
                           &init_error_)) {
    return; // check() reports init_error_; no devices
  }
  for (uint32_t i = 0; i < config_.device_count; ++i) {
    devices_.push_back(
        std::make_unique<Device>(i, config_.physical_ids[i], layout_, config_.capacity,
                                 config_.shared_heap));
  }
  pthread_atfork(nullptr, nullptr, onForkChild);
  std::atexit(onExit);
}

aclError Runtime::check(const char* api) const {
  if (g_forked_child.load(std::memory_order_relaxed)) {
    return fail(ACL_ERROR_RT_FAILURE,
                "%s: the NPU simulator was initialised in the parent process and cannot be "
                "used in a child created by fork(): its device threads and memory do not "
                "exist here. Use the 'spawn' start method for subprocesses that use the NPU.",
                api);
  }
  if (!init_error_.empty()) {
    return fail(ACL_ERROR_RT_FAILURE, "%s: the NPU simulator could not start: %s", api,
                init_error_.c_str());
  }
  return ACL_SUCCESS;
}

aclError Runtime::deviceById(int64_t id, const char* api, Device** out) {
  if (id < 0 || id >= static_cast<int64_t>(devices_.size())) {
    return fail(ACL_ERROR_RT_INVALID_DEVICEID,
                "%s: invalid device id %lld: the simulator has %u device(s) (ids 0 to %d; "
                "see NPU_SIM_DEVICE_COUNT and ASCEND_RT_VISIBLE_DEVICES)",
                api, static_cast<long long>(id), deviceCount(),
                static_cast<int>(deviceCount()) - 1);
  }
  *out = devices_[static_cast<size_t>(id)].get();
  return ACL_SUCCESS;
}

aclError Runtime::currentDevice(const char* api, Device** out) {
  const int32_t id = npu_sim::currentDevice();
  if (id < 0) {
    return fail(ACL_ERROR_RT_CONTEXT_NULL,
                "%s: this thread has no current device: call aclrtSetDevice first", api);
  }
  *out = devices_[static_cast<size_t>(id)].get();
  return ACL_SUCCESS;
}

aclError Runtime::stream(aclrtStream handle, const char* api, Stream** out) {
  if (handle == nullptr) {
    Device* device = nullptr;
    if (aclError err = currentDevice(api, &device); err != ACL_SUCCESS) {
      return err;
    }
    *out = device->defaultStream();
    return ACL_SUCCESS;
  }
  Stream* s = Stream::fromHandle(handle);
  if (s == nullptr) {
    return fail(ACL_ERROR_RT_PARAM_INVALID,
                "%s: %p is not a live stream (destroyed, or not created by "
                "aclrtCreateStream)",
                api, handle);
  }
  *out = s;
  return ACL_SUCCESS;
}

} // namespace npu_sim
