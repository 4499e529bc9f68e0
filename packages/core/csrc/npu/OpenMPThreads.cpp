#include "npu/OpenMPThreads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <system_error>
#include <thread>

namespace c10_npu {
namespace {

// Note [OpenMP teams of the host and device threads]. libgomp's entry
// points, looked up at run time so that core needs no OpenMP to build and
// finds the runtime ATen's parallel regions use (torch's bundled libgomp,
// in the global scope once torch is loaded).
using PauseAllFn = int (*)(int); // omp_pause_resource_all(omp_pause_soft)
using ParallelFn = void (*)(void (*)(void*), void*, unsigned, unsigned); // GOMP_parallel
constexpr int kOmpPauseSoft = 1;

constexpr int64_t kMinReleaseIntervalNs = 10'000'000;
constexpr int64_t kReleaseCostFactor = 20;
constexpr int64_t kSampleIntervalNs = 100'000'000;
// Idle workers sleep once the CPUs others leave free are fewer than a team
// needs by more than kContendedBy, and spin again once they are short by
// less than kFreeBy.
constexpr double kContendedBy = 0.5;
constexpr double kFreeBy = 0.25;
// Spinning on contended CPUs costs 10-30x, sleeping workers on free ones
// ~2x: the waits sleep after one contended sample and spin again only after
// this many free ones in a row (1 s), as other work comes in bursts.
constexpr int kFreeSamplesToSpin = 10;
// A launching thread that did not block for more than this share of the
// wall time over its last window (kSampleIntervalNs) mostly waits for the
// device: its idle team is released (1. of the Note).
constexpr double kWaitingShare = 0.25;

void* find_symbol(const char* name) {
  void* symbol = dlsym(RTLD_DEFAULT, name);
  if (symbol == nullptr) {
    if (void* gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
      symbol = dlsym(gomp, name);
    }
  }
  return symbol;
}

struct Gomp {
  PauseAllFn pause_all = nullptr;
  ParallelFn parallel = nullptr;
};

const Gomp& gomp() {
  static const Gomp g = [] {
    Gomp found;
    found.pause_all = reinterpret_cast<PauseAllFn>(find_symbol("omp_pause_resource_all"));
    found.parallel = reinterpret_cast<ParallelFn>(find_symbol("GOMP_parallel"));
    if (found.pause_all == nullptr || found.parallel == nullptr) {
      found = Gomp{};
    }
    return found;
  }();
  return g;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// For the per-launch check whether a release or a sample is due: a few
// nanoseconds instead of ~20 (no TSC read), a few ms resolution.
int64_t coarse_now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// ---------------------------------------------------------------------------
// 1. The launching thread's idle team

// Per thread: a team belongs to the thread that ran the parallel region.
thread_local int64_t tls_next_release_ns = 0;

// Whether idle workers are made to sleep (2.): releasing a team buys
// nothing then.
std::atomic<bool> g_waits_throttled{false};

// Per launching thread: whether it mostly waits for the device, from the
// time it spent blocked over its last window (Note [Release the team of a
// thread that waits for the device], OpenMPThreads.h).
struct LaunchingThreadShare {
  int64_t window_start_ns = 0; // coarse clock; 0: no window yet
  int64_t window_start_unblocked_ns = 0;
  bool waits_for_device = false;
};
thread_local LaunchingThreadShare tls_share;

// -1: measure; 0 or 1: the state set for testing (for every thread).
std::atomic<int> g_waits_for_device_for_testing{-1};

// The calling thread's time on a CPU or waiting for one (ns): the time it
// did not block. From the scheduler's statistics, whose second field is the
// time the thread was runnable but preempted: on busy CPUs a thread that
// never blocks gets a fraction of a CPU, and by its CPU time alone it would
// look like one that waits for the device (then releasing its team lets the
// device's workers spin and take even more of its CPU). Without them, its
// CPU time.
int64_t thread_unblocked_ns() {
  static const bool schedstat = access("/proc/thread-self/schedstat", R_OK) == 0;
  if (schedstat) {
    const int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char text[96];
      const ssize_t n = read(fd, text, sizeof(text) - 1);
      close(fd);
      unsigned long long run = 0, queued = 0;
      if (n > 0) {
        text[n] = '\0';
        if (std::sscanf(text, "%llu %llu", &run, &queued) == 2) {
          return static_cast<int64_t>(run + queued);
        }
      }
    }
  }
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

bool waits_for_device(int64_t coarse_now) {
  if (const int forced = g_waits_for_device_for_testing.load(std::memory_order_relaxed);
      forced >= 0) {
    return forced != 0;
  }
  LaunchingThreadShare& share = tls_share;
  if (coarse_now - share.window_start_ns < kSampleIntervalNs) {
    return share.waits_for_device;
  }
  const int64_t unblocked = thread_unblocked_ns();
  if (share.window_start_ns != 0) {
    const double busy = static_cast<double>(unblocked - share.window_start_unblocked_ns) /
        static_cast<double>(coarse_now - share.window_start_ns);
    share.waits_for_device = busy < kWaitingShare;
  }
  share.window_start_ns = coarse_now;
  share.window_start_unblocked_ns = unblocked;
  return share.waits_for_device;
}

void release_idle_team(int64_t coarse_now) {
  if (coarse_now < tls_next_release_ns) {
    return;
  }
  const int64_t start = now_ns();
  // Fails (nonzero) inside a parallel region, where the team is in use.
  gomp().pause_all(kOmpPauseSoft);
  const int64_t took = now_ns() - start;
  tls_next_release_ns = coarse_now + kMinReleaseIntervalNs + kReleaseCostFactor * took;
}

// ---------------------------------------------------------------------------
// 2. Throttled waits while other processes use the CPUs

int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    return CPU_COUNT(&set);
  }
  return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
}

void empty_region(void*) {}

// A parked thread whose idle OpenMP team, while it has one, makes the
// threads libgomp manages outnumber the CPUs. Leaked: it may be parked at
// process exit.
class WaitThrottle {
 public:
  static WaitThrottle& get() {
    static auto* throttle = new WaitThrottle();
    return *throttle;
  }

  void want(bool throttled) {
    std::lock_guard lock(mutex_);
    if (wanted_ == throttled) {
      return;
    }
    if (throttled && !started_) {
      try {
        std::thread([this] { loop(); }).detach();
      } catch (const std::system_error&) {
        return; // no thread to spare: the waits stay as they are
      }
      started_ = true;
    }
    wanted_ = throttled;
    g_waits_throttled.store(throttled, std::memory_order_relaxed);
    cv_.notify_all();
  }

  bool applied() {
    std::lock_guard lock(mutex_);
    return applied_;
  }

  void await_applied() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return applied_ == wanted_; });
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    while (true) {
      cv_.wait(lock, [&] { return wanted_ != applied_; });
      const bool throttle = wanted_;
      lock.unlock();
      if (throttle) {
        // One member per CPU adds CPUs - 1 idle workers to libgomp's count,
        // which holds the initial thread already: with any kernel team's
        // worker it exceeds the CPUs.
        gomp().parallel(&empty_region, nullptr, static_cast<unsigned>(available_cpus()), 0);
      } else {
        gomp().pause_all(kOmpPauseSoft);
      }
      lock.lock();
      applied_ = throttle;
      cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  bool wanted_ = false;
  bool applied_ = false;
  bool started_ = false;
};

// Busy CPU time of the whole machine, steal included (ns).
int64_t machine_busy_ns() {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) {
    return -1;
  }
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
                     steal = 0;
  const int fields = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice,
                                 &system, &idle, &iowait, &irq, &softirq, &steal);
  std::fclose(f);
  if (fields < 4) {
    return -1;
  }
  static const int64_t ns_per_tick = 1'000'000'000 / sysconf(_SC_CLK_TCK);
  return static_cast<int64_t>(user + nice + system + irq + softirq + steal) * ns_per_tick;
}

int64_t own_cpu_ns() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto ns = [](const timeval& t) {
    return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + static_cast<int64_t>(t.tv_usec) * 1000;
  };
  return ns(usage.ru_utime) + ns(usage.ru_stime);
}

// -1: sample; 0 or 1: the state set for testing.
std::atomic<int> g_contention_for_testing{-1};

class ContentionSampler {
 public:
  static ContentionSampler& get() {
    static auto* sampler = new ContentionSampler();
    return *sampler;
  }

  void maybe_sample(int64_t coarse_now) {
    if (coarse_now < next_ns_.load(std::memory_order_relaxed) ||
        g_contention_for_testing.load(std::memory_order_relaxed) >= 0) {
      return;
    }
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock() || coarse_now < next_ns_.load(std::memory_order_relaxed)) {
      return;
    }
    next_ns_.store(coarse_now + kSampleIntervalNs, std::memory_order_relaxed);
    const int64_t now = now_ns();
    const int64_t busy = machine_busy_ns();
    const int64_t own = own_cpu_ns();
    if (busy < 0) {
      return;
    }
    if (last_wall_ns_ != 0 && now > last_wall_ns_) {
      const double others = static_cast<double>((busy - last_busy_ns_) - (own - last_own_ns_)) /
          static_cast<double>(now - last_wall_ns_);
      // The launching thread's intra-op thread count stands for a kernel
      // team's (a stream's worker takes torch's as it starts).
      const double short_by = others - (cpus_ - at::get_num_threads());
      free_samples_ = short_by < kFreeBy ? free_samples_ + 1 : 0;
      if (!throttled_ && short_by > kContendedBy) {
        throttled_ = true;
        WaitThrottle::get().want(true);
      } else if (throttled_ && free_samples_ >= kFreeSamplesToSpin) {
        throttled_ = false;
        WaitThrottle::get().want(false);
      }
    }
    last_wall_ns_ = now;
    last_busy_ns_ = busy;
    last_own_ns_ = own;
  }

  // Testing: the sampling stops while a state is set; it restarts from a
  // fresh sample.
  void set_state(bool throttled) {
    std::lock_guard lock(mutex_);
    throttled_ = throttled;
    free_samples_ = 0;
    last_wall_ns_ = 0;
  }

 private:
  const int cpus_ = available_cpus();
  std::atomic<int64_t> next_ns_{0};
  std::mutex mutex_;
  bool throttled_ = false;
  int free_samples_ = 0;
  int64_t last_wall_ns_ = 0;
  int64_t last_busy_ns_ = 0;
  int64_t last_own_ns_ = 0;
};

// TORCH_NPU_OPENMP_WAITS=0 leaves libgomp's waits alone (to compare, or
// where threads are pinned and placed by hand).
bool enabled() {
  static const bool on = [] {
    const char* value = std::getenv("TORCH_NPU_OPENMP_WAITS");
    return gomp().pause_all != nullptr && (value == nullptr || std::string_view(value) != "0");
  }();
  return on;
}

// When a launching thread gives back its idle team (1. of the Note):
// TORCH_NPU_OPENMP_RELEASE_HOST_TEAM=1 always, =0 never, unset (or any
// other value) while the thread mostly waits for the device.
enum class ReleaseMode { kNever, kWhileWaiting, kAlways };

ReleaseMode release_mode() {
  static const ReleaseMode mode = [] {
    const char* value = std::getenv("TORCH_NPU_OPENMP_RELEASE_HOST_TEAM");
    if (value != nullptr && std::string_view(value) == "1") {
      return ReleaseMode::kAlways;
    }
    if (value != nullptr && std::string_view(value) == "0") {
      return ReleaseMode::kNever;
    }
    return ReleaseMode::kWhileWaiting;
  }();
  return mode;
}

bool release_wanted(int64_t coarse_now) {
  switch (release_mode()) {
    case ReleaseMode::kAlways:
      return true;
    case ReleaseMode::kNever:
      return false;
    case ReleaseMode::kWhileWaiting:
      return waits_for_device(coarse_now);
  }
  return false;
}

} // namespace

void prepare_launching_thread() noexcept {
  if (!enabled()) {
    return;
  }
  const int64_t now = coarse_now_ns();
  if (!g_waits_throttled.load(std::memory_order_relaxed) && release_wanted(now)) {
    release_idle_team(now);
  }
  ContentionSampler::get().maybe_sample(now);
}

bool openmp_waits_adjustable() {
  return enabled();
}

void reset_openmp_release_for_testing() {
  tls_next_release_ns = 0;
}

void set_waits_for_device_for_testing(int waits) {
  g_waits_for_device_for_testing.store(waits < 0 ? -1 : (waits != 0), std::memory_order_relaxed);
}

bool openmp_waits_throttled() {
  return enabled() && WaitThrottle::get().applied();
}

void set_cpu_contention_for_testing(int contended) {
  if (!enabled()) {
    return;
  }
  g_contention_for_testing.store(contended < 0 ? -1 : (contended != 0), std::memory_order_relaxed);
  if (contended >= 0) {
    ContentionSampler::get().set_state(contended != 0);
    WaitThrottle::get().want(contended != 0);
    WaitThrottle::get().await_applied();
  }
}

} // namespace c10_npu
