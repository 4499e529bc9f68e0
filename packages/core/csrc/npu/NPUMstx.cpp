#include "npu/NPUMstx.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include <c10/util/Exception.h>

#include "npu/NPUActivity.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUWork.h"

namespace c10_npu::mstx {
namespace {

// The activity records' clock (Note [Device activity records]).
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t native_thread_id() {
  thread_local const uint64_t tid = static_cast<uint64_t>(::syscall(SYS_gettid));
  return tid;
}

void check_text(const std::string& text, const char* what, const char* call) {
  TORCH_CHECK_VALUE(!text.empty(), "mstx.", call, ": the ", what, " is empty; pass a non-empty string.");
}

activity::Record host_record(
    const std::string& message, const std::string& domain, int64_t start_ns, int64_t end_ns) {
  activity::Record r;
  r.name = message;
  r.kind = activity::Kind::Mstx;
  r.device = current_device();
  r.stream = nullptr;
  r.work_id = 0;
  r.correlation_id = 0;
  r.start_ns = start_ns;
  r.end_ns = end_ns;
  r.bytes = 0;
  r.domain = domain;
  r.thread_id = native_thread_id();
  return r;
}

// The device half of a range: its start time, written by the start item
// when the stream reaches it and read by the end item, later on the same
// stream. A captured graph replays both items in order, so each replay
// records its own range (Note [Device work items run many times]).
struct DeviceRange {
  int64_t start_ns = 0;
};

// Enqueues, on `stream`, the untraced work that records `record` with the
// stream's own times: from when the stream reaches `range`'s start item (or
// this item, for a mark) to when it reaches this item.
void enqueue_device_end(
    const NPUStream& stream, activity::Record record, std::shared_ptr<DeviceRange> range) {
  record.stream = stream.stream();
  record.device = stream.device_index();
  launch_host_work(
      stream, "mstx",
      [record = std::move(record), range = std::move(range)]() {
        if (!activity::is_enabled()) {
          return;
        }
        activity::Record r = record;
        r.end_ns = now_ns();
        r.start_ns = range != nullptr ? range->start_ns : r.end_ns;
        activity::record_host(std::move(r));
      },
      nullptr, WorkFlags::Untraced);
}

std::shared_ptr<DeviceRange> enqueue_device_start(const NPUStream& stream) {
  auto range = std::make_shared<DeviceRange>();
  launch_host_work(
      stream, "mstx", [range]() { range->start_ns = now_ns(); }, nullptr, WorkFlags::Untraced);
  return range;
}

struct OpenRange {
  std::string message;
  std::string domain;
  int64_t start_ns = 0;
  bool recorded = false; // recording was on at the start
  std::optional<NPUStream> stream;
  std::shared_ptr<DeviceRange> device_range;
  uint64_t thread_id = 0; // of the start call
  c10::DeviceIndex device = -1;
};

OpenRange open_range(
    const std::string& message, const std::optional<NPUStream>& stream, const std::string& domain) {
  OpenRange range;
  range.message = message;
  range.domain = domain;
  range.recorded = activity::is_enabled();
  if (range.recorded) {
    range.start_ns = now_ns();
    range.thread_id = native_thread_id();
    range.device = current_device();
    if (stream.has_value()) {
      range.stream = stream;
      range.device_range = enqueue_device_start(*stream);
    }
  }
  return range;
}

void close_range(OpenRange& range) {
  if (!range.recorded || !activity::is_enabled()) {
    return;
  }
  activity::Record r = host_record(range.message, range.domain, range.start_ns, now_ns());
  r.thread_id = range.thread_id;
  r.device = range.device;
  if (range.stream.has_value()) {
    enqueue_device_end(*range.stream, r, std::move(range.device_range));
  }
  activity::record_host(std::move(r));
}

std::atomic<uint64_t> g_next_range_id{1};
std::mutex g_ranges_mutex;
std::unordered_map<uint64_t, OpenRange> g_ranges; // behind g_ranges_mutex

// range_push's stacks: per thread, per domain.
thread_local std::unordered_map<std::string, std::vector<OpenRange>> tls_pushed;

} // namespace

void mark(const std::string& message, const std::optional<NPUStream>& stream, const std::string& domain) {
  check_text(message, "message", "mark");
  check_text(domain, "domain", "mark");
  if (!activity::is_enabled()) {
    return;
  }
  const int64_t now = now_ns();
  activity::Record r = host_record(message, domain, now, now);
  if (stream.has_value()) {
    enqueue_device_end(*stream, r, nullptr);
  }
  activity::record_host(std::move(r));
}

uint64_t range_start(
    const std::string& message, const std::optional<NPUStream>& stream, const std::string& domain) {
  check_text(message, "message", "range_start");
  check_text(domain, "domain", "range_start");
  OpenRange range = open_range(message, stream, domain);
  const uint64_t id = g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(g_ranges_mutex);
  g_ranges.emplace(id, std::move(range));
  return id;
}

void range_end(uint64_t range_id, const std::string& domain) {
  check_text(domain, "domain", "range_end");
  OpenRange range;
  {
    std::lock_guard lock(g_ranges_mutex);
    auto it = g_ranges.find(range_id);
    TORCH_CHECK_VALUE(
        it != g_ranges.end(), "mstx.range_end: ", range_id,
        " is not the id of an open range: pass the id mstx.range_start returned, once.");
    TORCH_CHECK_VALUE(
        it->second.domain == domain, "mstx.range_end: range ", range_id, " was started in domain '",
        it->second.domain, "', not '", domain, "'; end it in the domain it was started in.");
    range = std::move(it->second);
    g_ranges.erase(it);
  }
  close_range(range);
}

int range_push(const std::string& message, const std::optional<NPUStream>& stream, const std::string& domain) {
  check_text(message, "message", "range_push");
  check_text(domain, "domain", "range_push");
  auto& stack = tls_pushed[domain];
  stack.push_back(open_range(message, stream, domain));
  return static_cast<int>(stack.size()) - 1;
}

int range_pop(const std::string& domain) {
  check_text(domain, "domain", "range_pop");
  auto it = tls_pushed.find(domain);
  TORCH_CHECK_VALUE(
      it != tls_pushed.end() && !it->second.empty(), "mstx.range_pop: this thread has no range pushed in domain '",
      domain, "'; call mstx.range_push first (ranges nest per thread and per domain).");
  OpenRange range = std::move(it->second.back());
  it->second.pop_back();
  close_range(range);
  return static_cast<int>(it->second.size());
}

} // namespace c10_npu::mstx
