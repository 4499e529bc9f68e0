#include "ExecutionCounters.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace torch_npu_ops {
namespace {

std::atomic<int64_t> g_async{0};
std::atomic<int64_t> g_sync{0};
std::atomic<int64_t> g_results_copied{0};
std::atomic<int64_t> g_results_placed{0};
std::atomic<int64_t> g_prepared[3]; // by PreparedRuns
std::mutex g_sync_ops_mutex;
std::map<std::string, int64_t> g_sync_ops;

// The fast path counts every op, right after its stores to the work item,
// which the worker reads on another core. A shared atomic counter would be
// a locked instruction there, and a locked instruction waits until those
// stores own their cache lines: a round trip between cores on every op.
// Each thread counts in a slot of its own, with plain stores, instead.
struct FastCount {
  alignas(64) std::atomic<int64_t> value{0};
};
std::mutex g_fast_mutex;
std::vector<FastCount*> g_fast_live; // slots of running threads
int64_t g_fast_retired = 0;          // counted by threads that exited
int64_t g_fast_reset_base = 0;       // the total at the last reset

struct ThreadFastCount {
  FastCount* slot = new FastCount;
  ThreadFastCount() {
    std::lock_guard<std::mutex> lock(g_fast_mutex);
    g_fast_live.push_back(slot);
  }
  ~ThreadFastCount() {
    std::lock_guard<std::mutex> lock(g_fast_mutex);
    g_fast_retired += slot->value.load(std::memory_order_relaxed);
    g_fast_live.erase(std::find(g_fast_live.begin(), g_fast_live.end(), slot));
    delete slot;
  }
};
thread_local ThreadFastCount tls_fast;

// Caller holds g_fast_mutex.
int64_t fast_total() {
  int64_t total = g_fast_retired;
  for (const FastCount* slot : g_fast_live) {
    total += slot->value.load(std::memory_order_relaxed);
  }
  return total;
}

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
  std::atomic<int64_t>& value = tls_fast.slot->value;
  value.store(value.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void count_prepared(PreparedRuns what) noexcept {
  g_prepared[static_cast<int>(what)].fetch_add(1, std::memory_order_relaxed);
}

void count_result(ResultDelivery delivery) noexcept {
  (delivery == ResultDelivery::Placed ? g_results_placed : g_results_copied).fetch_add(1, std::memory_order_relaxed);
}

std::map<std::string, int64_t> counters() {
  int64_t fast = 0;
  {
    std::lock_guard<std::mutex> lock(g_fast_mutex);
    fast = fast_total() - g_fast_reset_base;
  }
  return {{"device_async", g_async.load() + fast}, {"device_sync", g_sync.load()}, {"fast_path", fast},
          {"results_copied", g_results_copied.load()}, {"results_placed", g_results_placed.load()},
          {"replay_kernels", g_prepared[static_cast<int>(PreparedRuns::Kernel)].load()},
          {"replay_aliases", g_prepared[static_cast<int>(PreparedRuns::Aliases)].load()},
          {"replay_kernels_dropped", g_prepared[static_cast<int>(PreparedRuns::Dropped)].load()}};
}

std::map<std::string, int64_t> sync_ops() {
  std::lock_guard<std::mutex> lock(g_sync_ops_mutex);
  return g_sync_ops;
}

void reset_counters() {
  g_async.store(0);
  g_sync.store(0);
  g_results_copied.store(0);
  g_results_placed.store(0);
  for (auto& counter : g_prepared) {
    counter.store(0);
  }
  {
    // Other threads' slots are theirs to write: remember the total instead.
    std::lock_guard<std::mutex> lock(g_fast_mutex);
    g_fast_reset_base = fast_total();
  }
  std::lock_guard<std::mutex> lock(g_sync_ops_mutex);
  g_sync_ops.clear();
}

} // namespace torch_npu_ops
