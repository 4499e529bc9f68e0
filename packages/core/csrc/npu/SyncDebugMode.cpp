#include "npu/SyncDebugMode.h"

#include <atomic>

#include <c10/util/Exception.h>

namespace c10_npu {
namespace {

std::atomic<SyncDebugMode> sync_debug_mode{SyncDebugMode::Default};

} // namespace

void set_sync_debug_mode(SyncDebugMode mode) {
  sync_debug_mode.store(mode, std::memory_order_relaxed);
}

SyncDebugMode get_sync_debug_mode() {
  return sync_debug_mode.load(std::memory_order_relaxed);
}

void warn_or_error_on_sync() {
  switch (get_sync_debug_mode()) {
    case SyncDebugMode::Default:
      return;
    case SyncDebugMode::Warn:
      TORCH_WARN("called a synchronizing NPU operation");
      return;
    case SyncDebugMode::Error:
      TORCH_CHECK(false, "called a synchronizing NPU operation");
  }
}

} // namespace c10_npu
