#include "activity.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <vector>

namespace npu_sim::activity {

std::atomic<bool> g_enabled{false};

namespace {

std::mutex g_mutex;
std::deque<npuSimActivityRecord> g_records; // behind g_mutex
thread_local std::vector<uint64_t> tls_correlations;
thread_local CollectiveDetail tls_running_collective;
thread_local bool tls_has_running_collective = false;

} // namespace

void setEnabled(bool enabled) {
  g_enabled.store(enabled, std::memory_order_relaxed);
}

void pushCorrelation(uint64_t id) {
  tls_correlations.push_back(id);
}

bool popCorrelation(uint64_t* id) {
  if (tls_correlations.empty()) {
    return false;
  }
  *id = tls_correlations.back();
  tls_correlations.pop_back();
  return true;
}

uint64_t currentCorrelation() {
  return tls_correlations.empty() ? 0 : tls_correlations.back();
}

void record(const npuSimActivityRecord& record) {
  std::lock_guard lock(g_mutex);
  g_records.push_back(record);
}

void setRunningCollective(const CollectiveDetail& detail) {
  tls_running_collective = detail;
  tls_has_running_collective = true;
}

bool takeRunningCollective(CollectiveDetail* detail) {
  if (!tls_has_running_collective) {
    return false;
  }
  tls_has_running_collective = false;
  *detail = tls_running_collective;
  return true;
}

size_t flush(npuSimActivityRecord* out, size_t capacity) {
  std::lock_guard lock(g_mutex);
  const size_t count = std::min(capacity, g_records.size());
  std::copy_n(g_records.begin(), count, out);
  g_records.erase(g_records.begin(), g_records.begin() + static_cast<std::ptrdiff_t>(count));
  return count;
}

} // namespace npu_sim::activity
