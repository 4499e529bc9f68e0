#include "PythonMetaWarmup.h"

#include <atomic>
#include <mutex>

namespace torch_npu_ops {
namespace {

std::atomic<bool> g_ready{false};
std::atomic<MetaWarmupStarter> g_starter{nullptr};

} // namespace

bool meta_kernels_ready() {
  if (g_ready.load(std::memory_order_acquire)) {
    return true;
  }
  static std::once_flag started;
  std::call_once(started, [] {
    const MetaWarmupStarter starter = g_starter.load(std::memory_order_acquire);
    if (starter != nullptr) {
      starter();
    } else {
      set_meta_kernels_ready(); // no Python, no Python meta kernels to wait for
    }
  });
  return g_ready.load(std::memory_order_acquire);
}

void set_meta_kernels_ready() {
  g_ready.store(true, std::memory_order_release);
}

void set_meta_warmup_starter(MetaWarmupStarter starter) {
  g_starter.store(starter, std::memory_order_release);
}

} // namespace torch_npu_ops
