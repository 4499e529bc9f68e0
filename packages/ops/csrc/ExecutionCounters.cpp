#include "ExecutionCounters.h"

#include <mutex>

namespace torch_npu_ops {
namespace {

std::atomic<int64_t> g_async{0};
std::atomic<int64_t> g_sync{0};
std::atomic<int64_t> g_fast{0};
std::mutex g_sync_ops_mutex;
std::map<std::string, int64_t> g_sync_ops;

} // namespace

void count(ExecutionPath path, const std::string& op_name) {
  if (path == ExecutionPath::DeviceAsync) {
    g_async.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  g_sync.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(g_sync_ops_mutex);
  ++g_sync_ops[op_name];
}

void count_fast_path() noexcept {
  g_fast.fetch_add(1, std::memory_order_relaxed);
}

std::map<std::string, int64_t> counters() {
  const int64_t fast = g_fast.load();
  return {{"device_async", g_async.load() + fast}, {"device_sync", g_sync.load()}, {"fast_path", fast}};
}

std::map<std::string, int64_t> sync_ops() {
  std::lock_guard<std::mutex> lock(g_sync_ops_mutex);
  return g_sync_ops;
}

void reset_counters() {
  g_async.store(0);
  g_sync.store(0);
  g_fast.store(0);
  std::lock_guard<std::mutex> lock(g_sync_ops_mutex);
  g_sync_ops.clear();
}

} // namespace torch_npu_ops
