#include "npu/NPUActivity.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

#include <c10/util/Exception.h>

#include "npu/NPUException.h"
#include "npu/impl/AclInterface.h"

namespace c10_npu::activity {

// The Kind values are the simulator's.
static_assert(static_cast<uint32_t>(Kind::Kernel) == NPU_SIM_ACTIVITY_KERNEL);
static_assert(static_cast<uint32_t>(Kind::Memcpy) == NPU_SIM_ACTIVITY_MEMCPY);
static_assert(static_cast<uint32_t>(Kind::Memset) == NPU_SIM_ACTIVITY_MEMSET);

namespace {

std::atomic<bool> g_recording{false};
std::atomic<bool> g_forward_kineto_correlation{false};
std::atomic<bool> g_kineto_plugin{false};

std::mutex g_host_mutex;
std::vector<Record> g_host_records; // behind g_host_mutex

const acl::AclApi& recording_api() {
  const auto& api = acl::api();
  TORCH_CHECK(
      api.npuSimActivityEnable != nullptr,
      "Device activity records need the NPU simulator's activity API; the loaded runtime (",
      acl::backend_info().library, ") does not have it. Profile on CANN with msprof.");
  return api;
}

} // namespace

bool is_available() {
  return acl::api().npuSimActivityEnable != nullptr;
}

void enable(bool on) {
  NPU_CHECK(recording_api().npuSimActivityEnable(on ? 1 : 0));
  g_recording.store(on, std::memory_order_relaxed);
}

bool is_enabled() {
  return g_recording.load(std::memory_order_relaxed);
}

void forward_kineto_correlation(bool on) {
  g_forward_kineto_correlation.store(on, std::memory_order_relaxed);
}

bool forwarding_kineto_correlation() {
  return g_forward_kineto_correlation.load(std::memory_order_relaxed);
}

void note_kineto_plugin_registered() {
  g_kineto_plugin.store(true, std::memory_order_relaxed);
}

bool kineto_plugin_registered() {
  return g_kineto_plugin.load(std::memory_order_relaxed);
}

void record_host(Record record) {
  if (!is_enabled()) {
    return;
  }
  std::lock_guard lock(g_host_mutex);
  g_host_records.push_back(std::move(record));
}

void push_correlation_id(uint64_t id) {
  NPU_CHECK(recording_api().npuSimActivityPushCorrelationId(id));
}

uint64_t pop_correlation_id() {
  uint64_t id = 0;
  NPU_CHECK(recording_api().npuSimActivityPopCorrelationId(&id));
  return id;
}

std::vector<Record> flush() {
  const auto& api = recording_api();
  std::vector<Record> records;
  std::array<npuSimActivityRecord, 256> batch;
  size_t count = 0;
  do {
    NPU_CHECK(api.npuSimActivityFlush(batch.data(), batch.size(), &count));
    for (size_t i = 0; i < count; ++i) {
      const npuSimActivityRecord& r = batch[i];
      records.push_back(Record{
          r.name != nullptr ? r.name : "(unnamed)", static_cast<Kind>(r.kind),
          static_cast<c10::DeviceIndex>(r.deviceId), r.stream, r.workId, r.correlationId, r.startNs,
          r.endNs, r.bytes, std::string(), 0, r.rankCount, r.rank, r.peerRank, r.waitNs, r.syncNs});
    }
  } while (count == batch.size());
  std::vector<Record> host;
  {
    std::lock_guard lock(g_host_mutex);
    host.swap(g_host_records);
  }
  if (!host.empty()) {
    records.insert(records.end(), std::make_move_iterator(host.begin()), std::make_move_iterator(host.end()));
    std::stable_sort(records.begin(), records.end(), [](const Record& a, const Record& b) {
      return a.end_ns < b.end_ns;
    });
  }
  return records;
}

} // namespace c10_npu::activity
