#include "Watchdog.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_set>

#include <c10/util/Exception.h>

namespace c10d_npu {
namespace {

constexpr std::chrono::milliseconds kWatchdogPass{100};
constexpr int64_t kDefaultHeartbeatTimeoutSeconds = 480;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// TORCH_HCCL_ENABLE_MONITORING: on unless 0.
bool monitoring_enabled() {
  const std::string value = env("TORCH_HCCL_ENABLE_MONITORING");
  TORCH_CHECK_VALUE(value.empty() || value == "0" || value == "1",
                    "TORCH_HCCL_ENABLE_MONITORING='", value,
                    "' is not valid: use 1 (the default: a thread aborts the process when the "
                    "process group's watchdog is stuck) or 0 (no such thread)");
  return value != "0";
}

// HCCL_ASYNC_ERROR_HANDLING: whether the watchdog reports a failed
// communicator (Note [Watchdog and heartbeat monitor]); on unless 0. Any
// other whole number means on: torch_npu documents 0 and 1, and scripts
// ported from NCCL set its modes 2 and 3.
bool async_error_reports_enabled() {
  const std::string value = env("HCCL_ASYNC_ERROR_HANDLING");
  if (value.empty()) {
    return true;
  }
  char* end = nullptr;
  const long long mode = std::strtoll(value.c_str(), &end, 10);
  TORCH_CHECK_VALUE(*end == '\0' && mode >= 0, "HCCL_ASYNC_ERROR_HANDLING='", value,
                    "' is not valid: use 1 (the default: the watchdog reports a failed hccl "
                    "communicator on stderr) or 0 (it does not; the error still surfaces at "
                    "the next synchronizing call)");
  return mode != 0;
}

// TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC: whole seconds, 480 when unset.
std::chrono::milliseconds heartbeat_timeout() {
  const std::string value = env("TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC");
  if (value.empty()) {
    return std::chrono::seconds(kDefaultHeartbeatTimeoutSeconds);
  }
  char* end = nullptr;
  const long long seconds = std::strtoll(value.c_str(), &end, 10);
  TORCH_CHECK_VALUE(*end == '\0' && seconds > 0, "TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC='", value,
                    "' is not valid: give a positive whole number of seconds (the default is ",
                    kDefaultHeartbeatTimeoutSeconds, ")");
  return std::chrono::seconds(seconds);
}

} // namespace

// The live watchdogs, which the process stops at exit (before the static
// objects of HCCL's library, which the watchdog calls, are destroyed: a
// group that Python never destroys would otherwise still watch them).
// Leaked, so that it outlives every static destructor.
struct LiveWatchdogs {
  std::mutex mutex;
  std::unordered_set<Watchdog*> live;
};

LiveWatchdogs& live_watchdogs() {
  static LiveWatchdogs* watchdogs = [] {
    auto* created = new LiveWatchdogs;
    std::atexit([] {
      LiveWatchdogs& all = live_watchdogs();
      std::lock_guard<std::mutex> lock(all.mutex);
      for (Watchdog* w : all.live) {
        w->stop();
      }
      all.live.clear();
    });
    return created;
  }();
  return *watchdogs;
}

Watchdog::Watchdog(int rank) : rank_(rank), reports_(async_error_reports_enabled()) {
  const bool monitored = monitoring_enabled();
  const std::chrono::milliseconds timeout = heartbeat_timeout();
  LiveWatchdogs& all = live_watchdogs();
  std::lock_guard<std::mutex> lock(all.mutex);
  watchdog_ = std::thread([this] { run(); });
  if (monitored) {
    monitor_ = std::thread([this, timeout] { monitor(timeout); });
  }
  all.live.insert(this);
}

Watchdog::~Watchdog() {
  LiveWatchdogs& all = live_watchdogs();
  std::lock_guard<std::mutex> lock(all.mutex);
  if (all.live.erase(this) != 0) {
    stop();
  }
}

void Watchdog::stop() {
  // The monitor first: a watchdog that is slow to stop must not be reported
  // as stuck while it is being stopped.
  {
    std::lock_guard<std::mutex> lock(monitor_mutex_);
    monitor_stopping_ = true;
  }
  monitor_wake_.notify_all();
  if (monitor_.joinable()) {
    monitor_.join();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) {
    watchdog_.join();
  }
}

void Watchdog::watch(HcclComm comm, c10::Device device) {
  std::lock_guard<std::mutex> lock(mutex_);
  watched_.push_back(Watched{comm, device});
}

void Watchdog::unwatch(HcclComm comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  watched_.erase(std::remove_if(watched_.begin(), watched_.end(),
                                [comm](const Watched& w) { return w.comm == comm; }),
                 watched_.end());
}

void Watchdog::run() {
  const bool stall = env("TORCH_NPU_TEST_STALL_WATCHDOG") == "1";
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    for (Watched& w : watched_) {
      if (w.reported || !reports_) {
        continue;
      }
      HcclResult error = HCCL_SUCCESS;
      const HcclResult queried = c10_npu::hccl::api().HcclGetCommAsyncError(w.comm, &error);
      if (queried == HCCL_SUCCESS && error != HCCL_SUCCESS) {
        w.reported = true;
        std::fprintf(stderr,
                     "[rank %d] ProcessGroupHCCL watchdog: the hccl communicator of %s failed "
                     "(%s); its collectives fail from now on, and the error of the first one "
                     "says why. Destroy the process group (or restart the job).\n",
                     rank_, w.device.str().c_str(), c10_npu::hccl::result_name(error));
      }
    }
    heartbeat_.fetch_add(1, std::memory_order_relaxed);
    if (stall && !watched_.empty()) {
      // Note [Watchdog and heartbeat monitor]: a hung call, for tests, once
      // there is a communicator to name (the test's first collective may
      // come later than the timeout on a loaded machine).
      wake_.wait(lock, [this] { return stopping_; });
      break;
    }
    wake_.wait_for(lock, kWatchdogPass, [this] { return stopping_; });
  }
}

void Watchdog::monitor(std::chrono::milliseconds timeout) {
  const auto period = std::min<std::chrono::milliseconds>(timeout / 10, std::chrono::seconds(1));
  uint64_t seen = heartbeat_.load(std::memory_order_relaxed);
  auto beat_at = std::chrono::steady_clock::now();
  // Its own lock and signal: the monitor never waits for the watchdog's lock.
  std::unique_lock<std::mutex> lock(monitor_mutex_);
  while (!monitor_wake_.wait_for(lock, period, [this] { return monitor_stopping_; })) {
    const uint64_t beat = heartbeat_.load(std::memory_order_relaxed);
    const auto now = std::chrono::steady_clock::now();
    if (beat != seen) {
      seen = beat;
      beat_at = now;
      continue;
    }
    const auto stuck = std::chrono::duration_cast<std::chrono::milliseconds>(now - beat_at);
    if (stuck >= timeout) {
      terminate(stuck, timeout);
    }
  }
}

void Watchdog::terminate(std::chrono::milliseconds stuck, std::chrono::milliseconds timeout) {
  std::string comms;
  {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
      comms = "unknown (the watchdog holds their list)";
    } else {
      for (const Watched& w : watched_) {
        comms += (comms.empty() ? "" : ", ") + w.device.str() +
            (w.reported ? " (failed)" : "");
      }
      if (comms.empty()) {
        comms = "none yet";
      }
    }
  }
  std::fprintf(stderr,
               "[rank %d] ProcessGroupHCCL heartbeat monitor: the process group's watchdog "
               "thread has not made progress for %.1f s (TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC=%lld): "
               "it is stuck, most likely in an HCCL or runtime call that does not return. "
               "Communicators it watches: %s. Aborting the process (SIGABRT) so that the job "
               "does not hang; set TORCH_HCCL_ENABLE_MONITORING=0 to keep such a process "
               "running, or raise TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC.\n",
               rank_, static_cast<double>(stuck.count()) / 1000,
               static_cast<long long>(timeout.count() / 1000), comms.c_str());
  std::fflush(stderr);
  std::abort();
}

} // namespace c10d_npu
