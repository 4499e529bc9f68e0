#include "device.h"

#include <algorithm>

#include "checker_signal.h"
#include "errors.h"
#include "config.h"
#include "race_detector.h"
#include "runtime.h"
#include "stream.h"
#include "util.h"

namespace npu_sim {
namespace {

thread_local int32_t tls_current_device = -1;

} // namespace

int32_t currentDevice() {
  return tls_current_device;
}

void setCurrentDevice(int32_t device) {
  tls_current_device = device;
}

Device::Device(uint32_t id, int32_t physical_id, const AddressLayout& layout,
               uint64_t capacity, bool shared_heap)
    : id_(id), physical_id_(physical_id), memory_(id, layout, capacity, shared_heap) {}

aclError Device::ensureInitialized() {
  if (initialized()) {
    return ACL_SUCCESS;
  }
  std::lock_guard lock(init_mutex_);
  if (initialized_.load(std::memory_order_relaxed)) {
    return ACL_SUCCESS;
  }
  if (config().checker) {
    installCheckerSignalHandler();
  }
  if (aclError err = memory_.initialize(); err != ACL_SUCCESS) {
    return err;
  }
  default_stream_ = new Stream(id_, 0, 0, /*is_default=*/true);
  addStream(default_stream_);
  {
    std::lock_guard sample(utilization_mutex_);
    sample_start_ns_ = nowNs();
  }
  noteDeviceInitialized();
  initialized_.store(true, std::memory_order_release);
  return ACL_SUCCESS;
}

void Device::addStream(Stream* stream) {
  std::lock_guard lock(streams_mutex_);
  streams_.push_back(stream);
}

void Device::removeStream(Stream* stream) {
  std::lock_guard lock(streams_mutex_);
  retired_busy_ns_ += stream->busyNs(nowNs());
  streams_.erase(std::remove(streams_.begin(), streams_.end(), stream), streams_.end());
}

aclError Device::drain(const char* api, std::shared_ptr<WorkError>* error) {
  if (!initialized()) {
    return ACL_SUCCESS;
  }
  const Stream* self = Stream::current();
  if (self != nullptr && self->device() == id_) {
    return fail(ACL_ERROR_RT_PARAM_INVALID,
                "%s: device work cannot wait for its own device %u (it would wait for "
                "itself)",
                api, id_);
  }
  std::vector<Stream*> streams = retainStreams();
  std::vector<uint64_t> targets;
  targets.reserve(streams.size());
  for (Stream* s : streams) {
    targets.push_back(s->enqueued());
  }
  bool ok = true; // false: cut short by process exit
  for (size_t i = 0; i < streams.size() && ok; ++i) {
    ok = streams[i]->waitFor(targets[i]);
  }
  if (ok && race::enabled()) {
    race::hostWaitedDevice(id_);
  }
  if (ok && error != nullptr) {
    for (Stream* s : streams) {
      std::shared_ptr<WorkError> e = s->takeError();
      // A failure that one stream inherited from another (Note [Device-work
      // errors follow the dependencies], event.h) is one failure.
      if (e == nullptr || e == *error || e->reported.load(std::memory_order_acquire)) {
        continue;
      }
      if (*error == nullptr) {
        *error = std::move(e);
      } else if (e->claim()) {
        (*error)->more.fetch_add(1 + e->more.load(std::memory_order_relaxed),
                                 std::memory_order_relaxed);
      }
    }
  }
  for (Stream* s : streams) {
    s->release();
  }
  // !ok: the process is exiting and the rest of the work was abandoned;
  // that is success for the caller (see runtime.h).
  return ACL_SUCCESS;
}

int32_t Device::utilizationPercent() {
  if (!initialized()) {
    return 0;
  }
  std::lock_guard sample(utilization_mutex_);
  const int64_t now = nowNs();
  uint64_t busy = 0;
  {
    std::lock_guard lock(streams_mutex_);
    busy = retired_busy_ns_;
    for (const Stream* s : streams_) {
      busy += s->busyNs(now);
    }
  }
  const int64_t period = now - sample_start_ns_;
  const uint64_t busy_in_period = busy > sample_busy_ns_ ? busy - sample_busy_ns_ : 0;
  sample_start_ns_ = now;
  sample_busy_ns_ = busy;
  if (period <= 0) {
    return 0;
  }
  const double percent = 100.0 * static_cast<double>(busy_in_period) / static_cast<double>(period);
  return static_cast<int32_t>(std::min(100.0, percent + 0.5));
}

std::vector<Stream*> Device::retainStreams() {
  std::lock_guard lock(streams_mutex_);
  for (Stream* s : streams_) {
    s->retain();
  }
  return streams_;
}

} // namespace npu_sim
