// Small helpers shared by the simulator: sizes, formatting, clocks and the
// bounded spin used before blocking.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdarg>
#include <string>

#include <sched.h>

namespace npu_sim {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kGiB = 1024 * kMiB;
constexpr uint64_t kTiB = 1024 * kGiB;

// Physical ranges are whole host pages so that punching a hole into a freed
// range can never drop a neighbour's data.
constexpr uint64_t kPageSize = 4 * kKiB;
// aclrtMemGetAllocationGranularity; also the alignment of VMM reservations
// and of every per-device address window.
constexpr uint64_t kVmmGranularity = 2 * kMiB;

inline bool isPowerOfTwo(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

// Rounds `value` up to a multiple of the power of two `align`; false on
// overflow.
inline bool roundUp(uint64_t value, uint64_t align, uint64_t* out) {
  const uint64_t mask = align - 1;
  if (value > UINT64_MAX - mask) {
    return false;
  }
  *out = (value + mask) & ~mask;
  return true;
}

// "2.00 GiB", "512.00 MiB", "100 B".
std::string formatBytes(uint64_t bytes);

// printf into a std::string.
std::string strFormat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// strFormat for a va_list (which it consumes).
std::string vstrFormat(const char* fmt, va_list args);

// Monotonic nanoseconds; event timestamps use it.
inline int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Data written by different threads goes on separate cache lines of this
// size (x86-64 and most AArch64 cores).
constexpr size_t kCacheLine = 64;

// Tells the core we are spinning (cheaper for the sibling hyperthread and
// for power than a bare loop).
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}

// Spin budgets. Waking a sleeping thread costs a futex call on both sides
// (several microseconds); work usually arrives or completes within a few
// microseconds, so everybody spins this long before blocking.
constexpr std::chrono::nanoseconds kWorkerIdleSpin{40'000};
constexpr std::chrono::nanoseconds kWaiterSpin{20'000};
// A worker's first sleep after its idle spin ends by itself after this
// long (see Stream::awaitWork): it bounds the delay of an item whose
// producer raced with the worker falling asleep.
constexpr std::chrono::nanoseconds kWorkerFirstSleep{1'000'000};

// A synchronizer whose stream's worker is inside a large copy or memset
// keeps yielding instead of sleeping when the copy should end within this
// budget. On a VM, waking a thread whose virtual CPU went idle takes the
// host 100-250 us; once per synchronize that is 2-4% of a 64 MiB copy.
// Yielding leaves the CPU to any other runnable thread, as CUDA's default
// synchronization (spin when CPUs outnumber contexts, else yield) does.
constexpr std::chrono::nanoseconds kWaiterBulkSpin{20'000'000};
// Copies and memsets from this size on count as large.
constexpr size_t kBulkBytes = 1 << 20;

// Calls `ready()` until it is true or `budget` has passed. Reads the clock
// only every few iterations because it costs more than a pause.
//
// Note [Spinning yields]: every few microseconds the spinner also yields
// its CPU to any other runnable thread. The thread a spinner waits for
// (a peer rank's worker, the worker of the stream an event is on) is often
// runnable on the same CPU: with more busy threads than CPUs (two ranks of
// two or three threads each on a 2-CPU machine), a spin of pauses only
// delays it until the scheduler's next tick, and the wait costs the whole
// spin plus a futex wake-up. With nothing else runnable, sched_yield
// returns at once (a system call, well under a microsecond).
template <typename Pred>
bool spinUntil(Pred&& ready, std::chrono::nanoseconds budget) {
  if (ready()) {
    return true;
  }
  const int64_t deadline = nowNs() + budget.count();
  for (unsigned i = 1;; ++i) {
    cpuRelax();
    if (ready()) {
      return true;
    }
    if ((i & 31) == 0) {
      if (nowNs() >= deadline) {
        return false;
      }
      if ((i & 127) == 0) {
        sched_yield();
      }
    }
  }
}

} // namespace npu_sim
