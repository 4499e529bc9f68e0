// What device work reads and writes, declared at launch for the simulator's
// stream race detector (Note [Stream race detection],
// simulator/race_detector.h).
//
// A launcher that knows its item's accesses (the ops package's kernels,
// core's copy kernels) opens a WorkAccessScope around the launch and names
// the tensors read and written; launch_work (NPUWork.h) passes them on.
// Copies, memsets and collectives need no scope: the runtime sees their
// buffers. While the detector is off (the default), a scope is one relaxed
// load and launch_work one more.
#pragma once

#include <atomic>
#include <cstddef>
#include <vector>

#include <ATen/core/TensorBase.h>

#include "npu/Macros.h"
#include "npu/NPUWork.h"

namespace c10_npu {

namespace detail {
TORCH_NPU_API extern std::atomic<bool> g_race_check;
} // namespace detail

// Whether the stream race detector is on (NPU_SIM_RACE_CHECK=1 at start,
// or set_race_check_enabled).
inline bool race_check_enabled() {
  return detail::g_race_check.load(std::memory_order_relaxed);
}

// Turns the detector on or off (off forgets what it tracked). Raises on a
// runtime without one (CANN).
TORCH_NPU_API void set_race_check_enabled(bool enabled);

// Where the host launches work from: the ops package registers its capture
// of the Python line (LaunchSite), named in race reports. Null: none.
using LaunchSiteProvider = LaunchSite (*)();
TORCH_NPU_API void set_launch_site_provider(LaunchSiteProvider provider);

// Waits for `stream`'s work, as NPUStream::synchronize, for a wait only the
// simulator does (an op's first call waits for its kernel to raise errors
// at the call): the race detector does not count it as ordering later
// launches, so it does not hide the program's races.
TORCH_NPU_API void synchronize_unordered(const NPUStream& stream);

// One range of device memory.
struct WorkAccess {
  const void* ptr;
  size_t bytes;
  bool write; // read-modify-write counts as a write
};

// The device memory read and written by the work the current thread
// launches (launch_work) while the scope lives; inactive (nothing is
// collected) while the detector is off. The innermost scope counts.
class TORCH_NPU_API WorkAccessScope {
 public:
  WorkAccessScope() : active_(race_check_enabled()) {
    if (C10_UNLIKELY(active_)) {
      enter();
    }
  }
  ~WorkAccessScope() {
    if (C10_UNLIKELY(active_)) {
      leave();
    }
  }
  WorkAccessScope(const WorkAccessScope&) = delete;
  WorkAccessScope& operator=(const WorkAccessScope&) = delete;

  bool active() const {
    return active_;
  }
  // The tensor's bytes: a strided view's dense runs (up to 64 of them),
  // else the bytes between its lowest and highest element (gaps
  // included). No-op for undefined, empty or non-npu tensors.
  void read(const at::TensorBase& tensor) {
    add(tensor, false);
  }
  void write(const at::TensorBase& tensor) {
    add(tensor, true);
  }
  void add(const at::TensorBase& tensor, bool write);

  // The accesses of the innermost scope of this thread, or null.
  static const std::vector<WorkAccess>* current();

 private:
  void enter();
  void leave();

  bool active_;
  WorkAccessScope* outer_ = nullptr;
  std::vector<WorkAccess> accesses_;
};

} // namespace c10_npu
