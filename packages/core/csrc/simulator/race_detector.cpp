#include "race_detector.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "config.h"
#include "errors.h"
#include "event.h"
#include "runtime.h"
#include "stream.h"

namespace npu_sim::race {

std::atomic<bool> g_enabled{false};

namespace {

// One component per stream the detector has seen (streams get an index at
// their first tracked launch; a destroyed stream's index is never reused).
using VectorClock = std::vector<uint64_t>;

void join(VectorClock& into, const VectorClock& other) {
  if (into.size() < other.size()) {
    into.resize(other.size(), 0);
  }
  for (size_t i = 0; i < other.size(); ++i) {
    into[i] = std::max(into[i], other[i]);
  }
}

uint64_t component(const VectorClock& clock, uint32_t index) {
  return index < clock.size() ? clock[index] : 0;
}

// Who launched an access, for the report.
struct Origin {
  std::string name;
  std::string site;   // empty: unknown
  const void* stream; // null: the host
  uint32_t device;
  bool default_stream;
};

struct Access {
  uint32_t stream = 0; // index
  uint64_t clock = 0;  // 0: none
  std::shared_ptr<const Origin> origin;
};

// The accesses to one byte interval [begin, end) since its last write.
struct Segment {
  uintptr_t end;
  Access write;              // clock 0: no write tracked
  std::vector<Access> reads; // since the write, the latest per stream
};

// The index the host's accesses are checked under: no stream has it, so
// only the host's clock orders earlier work before them.
constexpr uint32_t kHostIndex = UINT32_MAX;

struct StreamState {
  uint32_t index;
  uint32_t device;
  VectorClock clock;
};

struct Race {
  const npuSimMemAccess* access;
  uintptr_t begin;
  uintptr_t end;
  bool previous_write;
  Access previous;
};

class Detector {
 public:
  aclError launch(Stream* stream, const char* name, const npuSimMemAccess* accesses, size_t count,
                  std::string site) {
    const AddressLayout& layout = Runtime::get().layout();
    std::unique_lock lock(mutex_);
    StreamState& s = state(stream);
    join(s.clock, host_);
    if (s.clock.size() <= s.index) {
      s.clock.resize(s.index + 1, 0);
    }
    for (size_t i = 0; i < count; ++i) {
      const npuSimMemAccess& a = accesses[i];
      const auto begin = reinterpret_cast<uintptr_t>(a.ptr);
      if (a.bytes == 0 || !layout.inDeviceRange(begin)) {
        continue;
      }
      if (auto race = findRace(s, a, begin, begin + a.bytes)) {
        const Origin now{name, site, stream, stream->device(), stream->isDefault()};
        const std::string message = describe(*race, now);
        lock.unlock();
        return fail(ACL_ERROR_RT_FAILURE, "%s", message.c_str());
      }
    }
    const uint64_t tick = ++s.clock[s.index];
    Access stamp{s.index, tick,
                 std::make_shared<const Origin>(
                     Origin{name, std::move(site), stream, stream->device(), stream->isDefault()})};
    // Reads first: an item that reads and writes a range leaves its write.
    for (const bool writes : {false, true}) {
      for (size_t i = 0; i < count; ++i) {
        const npuSimMemAccess& a = accesses[i];
        const auto begin = reinterpret_cast<uintptr_t>(a.ptr);
        if (a.bytes == 0 || !layout.inDeviceRange(begin) || (a.write != 0) != writes) {
          continue;
        }
        writes ? recordWrite(begin, begin + a.bytes, stamp) : recordRead(begin, begin + a.bytes, stamp);
      }
    }
    return ACL_SUCCESS;
  }

  // Synchronous aclrtMemcpy / aclrtMemset: the host touches device memory
  // itself, ordered after exactly what it synchronised with (host_).
  aclError hostAccess(const char* name, const npuSimMemAccess* accesses, size_t count,
                      std::string site) {
    const AddressLayout& layout = Runtime::get().layout();
    std::unique_lock lock(mutex_);
    const StreamState host{kHostIndex, 0, host_};
    for (size_t i = 0; i < count; ++i) {
      const npuSimMemAccess& a = accesses[i];
      const auto begin = reinterpret_cast<uintptr_t>(a.ptr);
      if (a.bytes == 0 || !layout.inDeviceRange(begin)) {
        continue;
      }
      if (auto race = findRace(host, a, begin, begin + a.bytes)) {
        const Origin now{name, std::move(site), nullptr, 0, false};
        const std::string message = describe(*race, now);
        lock.unlock();
        return fail(ACL_ERROR_RT_FAILURE, "%s", message.c_str());
      }
    }
    // Every earlier access is ordered before the host's, and every later
    // launch joins the host's clock: a host write leaves nothing to check
    // (clock 0), a host read needs no record.
    for (size_t i = 0; i < count; ++i) {
      const npuSimMemAccess& a = accesses[i];
      const auto begin = reinterpret_cast<uintptr_t>(a.ptr);
      if (a.write != 0 && a.bytes != 0 && layout.inDeviceRange(begin)) {
        recordWrite(begin, begin + a.bytes, Access{});
      }
    }
    return ACL_SUCCESS;
  }

  void eventRecorded(Event* event, Stream* stream) {
    std::lock_guard lock(mutex_);
    StreamState& s = state(stream);
    join(s.clock, host_);
    events_[event] = s.clock;
  }

  void streamWaitedEvent(Stream* stream, Event* event) {
    std::lock_guard lock(mutex_);
    auto it = events_.find(event);
    if (it != events_.end()) {
      join(state(stream).clock, it->second);
    }
  }

  void hostWaitedStream(Stream* stream) {
    std::lock_guard lock(mutex_);
    auto it = streams_.find(stream);
    if (it != streams_.end()) {
      join(host_, it->second.clock);
    }
  }

  void hostWaitedEvent(Event* event) {
    std::lock_guard lock(mutex_);
    auto it = events_.find(event);
    if (it != events_.end()) {
      join(host_, it->second);
    }
  }

  void hostWaitedDevice(uint32_t device) {
    std::lock_guard lock(mutex_);
    for (const auto& [stream, s] : streams_) {
      if (s.device == device) {
        join(host_, s.clock);
      }
    }
  }

  void memoryFreed(uintptr_t begin, uintptr_t end) {
    std::lock_guard lock(mutex_);
    split(begin);
    split(end);
    shadow_.erase(shadow_.lower_bound(begin), shadow_.lower_bound(end));
  }

  void streamDestroyed(Stream* stream) {
    // aclrtDestroyStream drained the stream: the host is ordered after it.
    std::lock_guard lock(mutex_);
    auto it = streams_.find(stream);
    if (it != streams_.end()) {
      join(host_, it->second.clock);
      streams_.erase(it);
    }
  }

  void eventDestroyed(Event* event) {
    std::lock_guard lock(mutex_);
    events_.erase(event);
  }

  void clear() {
    std::lock_guard lock(mutex_);
    streams_.clear();
    events_.clear();
    shadow_.clear();
    host_.clear();
    next_index_ = 0;
  }

 private:
  StreamState& state(Stream* stream) {
    auto it = streams_.find(stream);
    if (it == streams_.end()) {
      it = streams_.emplace(stream, StreamState{next_index_++, stream->device(), {}}).first;
    }
    return it->second;
  }

  static bool ordered(const StreamState& s, const Access& earlier) {
    return earlier.clock == 0 || earlier.stream == s.index ||
        component(s.clock, earlier.stream) >= earlier.clock;
  }

  std::optional<Race> findRace(const StreamState& s, const npuSimMemAccess& a, uintptr_t begin,
                               uintptr_t end) const {
    auto it = shadow_.upper_bound(begin);
    if (it != shadow_.begin() && std::prev(it)->second.end > begin) {
      --it;
    }
    for (; it != shadow_.end() && it->first < end; ++it) {
      const Segment& seg = it->second;
      const uintptr_t lo = std::max(begin, it->first);
      const uintptr_t hi = std::min(end, seg.end);
      if (!ordered(s, seg.write)) {
        return Race{&a, lo, hi, true, seg.write};
      }
      if (a.write != 0) {
        for (const Access& read : seg.reads) {
          if (!ordered(s, read)) {
            return Race{&a, lo, hi, false, read};
          }
        }
      }
    }
    return std::nullopt;
  }

  // Makes `at` a segment boundary.
  void split(uintptr_t at) {
    auto it = shadow_.upper_bound(at);
    if (it == shadow_.begin()) {
      return;
    }
    --it;
    if (it->first < at && at < it->second.end) {
      Segment tail = it->second;
      it->second.end = at;
      shadow_.emplace_hint(std::next(it), at, std::move(tail));
    }
  }

  void recordWrite(uintptr_t begin, uintptr_t end, const Access& stamp) {
    split(begin);
    split(end);
    auto first = shadow_.lower_bound(begin);
    auto last = shadow_.lower_bound(end);
    auto hint = shadow_.erase(first, last);
    shadow_.emplace_hint(hint, begin, Segment{end, stamp, {}});
  }

  void recordRead(uintptr_t begin, uintptr_t end, const Access& stamp) {
    split(begin);
    split(end);
    uintptr_t cursor = begin;
    auto it = shadow_.lower_bound(begin);
    while (cursor < end) {
      if (it == shadow_.end() || it->first > cursor) {
        // A gap nobody touched since tracking began: a new segment.
        const uintptr_t gap_end = it == shadow_.end() ? end : std::min(end, it->first);
        it = shadow_.emplace_hint(it, cursor, Segment{gap_end, Access{}, {stamp}});
      } else {
        auto& reads = it->second.reads;
        auto same = std::find_if(reads.begin(), reads.end(),
                                 [&](const Access& r) { return r.stream == stamp.stream; });
        if (same != reads.end()) {
          *same = stamp;
        } else {
          reads.push_back(stamp);
        }
      }
      cursor = it->second.end;
      ++it;
    }
  }

  static std::string streamName(const Origin& o) {
    if (o.stream == nullptr) {
      return "the host (synchronous call)";
    }
    char text[96];
    std::snprintf(text, sizeof text, "stream %p (npu:%u%s)", o.stream, o.device,
                  o.default_stream ? ", default stream" : "");
    return text;
  }

  static std::string line(const char* label, bool write, const Origin& o) {
    return std::string("  ") + label + (write ? "write" : "read ") + " by '" + o.name + "' on " +
        streamName(o) + ", launched from " +
        (o.site.empty() ? std::string("an unknown site") : o.site);
  }

  static std::string describe(const Race& r, const Origin& now) {
    const std::string& name = now.name;
    const Origin& before = *r.previous.origin;
    const bool write = r.access->write != 0;
    const char* kind = r.previous_write ? (write ? "write-after-write" : "read-after-write")
                                        : "write-after-read";
    char range[96];
    std::snprintf(range, sizeof range, "[0x%" PRIxPTR ", 0x%" PRIxPTR ") (%" PRIuPTR " bytes)",
                  r.begin, r.end, r.end - r.begin);
    return std::string("NPU stream race (") + kind + ") on device memory " + range + ": '" + name +
        "' on " + streamName(now) + (write ? " writes" : " reads") + " memory that '" +
        before.name + "' on " + streamName(before) + (r.previous_write ? " wrote" : " read") +
        ", and nothing orders the two.\n" + line("now:    ", write, now) + "\n" +
        line("before: ", r.previous_write, before) +
        "\nMake the second stream wait for the first (stream.wait_stream(other), an event "
        "record and wait, or a synchronize) before the access, and call "
        "tensor.record_stream(stream) for memory handed to another stream. (Reported by the "
        "simulator's race detector, NPU_SIM_RACE_CHECK=1.)";
  }

  std::mutex mutex_;
  std::unordered_map<const Stream*, StreamState> streams_;
  std::unordered_map<const Event*, VectorClock> events_; // snapshot of the latest record
  std::map<uintptr_t, Segment> shadow_;                  // disjoint, keyed by begin
  VectorClock host_;
  uint32_t next_index_ = 0;
};

Detector& detector() {
  static Detector* d = new Detector(); // never destroyed: workers may outlive exit
  return *d;
}

std::atomic<npuSimLaunchSiteFn> g_site_provider{nullptr};

} // namespace

void applyConfig() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (config().race_check) {
      g_enabled.store(true, std::memory_order_relaxed);
    }
  });
}

void setEnabled(bool enabled) {
  applyConfig(); // an explicit setting wins over the environment
  g_enabled.store(enabled, std::memory_order_relaxed);
  if (!enabled) {
    detector().clear();
  }
}

void setSiteProvider(npuSimLaunchSiteFn provider) {
  g_site_provider.store(provider, std::memory_order_release);
}

namespace {
// The provider may take locks of its own (Python's): called before the
// detector's lock.
std::string launchSite() {
  std::string site;
  if (npuSimLaunchSiteFn provider = g_site_provider.load(std::memory_order_acquire)) {
    if (const char* text = provider()) {
      site = text;
    }
  }
  return site;
}
} // namespace

aclError launch(Stream* stream, const char* name, const npuSimMemAccess* accesses, size_t count) {
  return detector().launch(stream, name, accesses, count, launchSite());
}

aclError hostAccess(const char* name, const npuSimMemAccess* accesses, size_t count) {
  return detector().hostAccess(name, accesses, count, launchSite());
}

void eventRecorded(Event* event, Stream* stream) {
  detector().eventRecorded(event, stream);
}
void streamWaitedEvent(Stream* stream, Event* event) {
  detector().streamWaitedEvent(stream, event);
}
void hostWaitedStream(Stream* stream) {
  detector().hostWaitedStream(stream);
}
void hostWaitedEvent(Event* event) {
  detector().hostWaitedEvent(event);
}
void hostWaitedDevice(uint32_t device) {
  detector().hostWaitedDevice(device);
}
void memoryFreed(uintptr_t begin, uint64_t bytes) {
  detector().memoryFreed(begin, begin + bytes);
}
void streamDestroyed(Stream* stream) {
  detector().streamDestroyed(stream);
}
void eventDestroyed(Event* event) {
  detector().eventDestroyed(event);
}

} // namespace npu_sim::race
