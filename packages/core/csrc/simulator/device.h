// The device table entries and the calling thread's current device.
#pragma once

#include <atomic>
#include <memory>
#include <cstdint>
#include <mutex>
#include <vector>

#include "acl_types.h"
#include "device_memory.h"
#include "errors.h"

namespace npu_sim {

class Stream;

class Device {
 public:
  // `shared_heap`: Note [Device heap kind] (config.cpp).
  Device(uint32_t id, int32_t physical_id, const AddressLayout& layout, uint64_t capacity,
         bool shared_heap);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  uint32_t id() const {
    return id_;
  }
  int32_t physicalId() const {
    return physical_id_;
  }

  // First aclrtSetDevice: creates the memory and the default stream (whose
  // worker thread starts only with its first work). Installs the checker's
  // fault handler when the checker is on.
  aclError ensureInitialized();
  bool initialized() const {
    return initialized_.load(std::memory_order_acquire);
  }

  DeviceMemory& memory() {
    return memory_;
  }
  Stream* defaultStream() const {
    return default_stream_;
  }

  void addStream(Stream* stream);
  void removeStream(Stream* stream);
  // Every stream of the device, each retained: release() them after use.
  std::vector<Stream*> retainStreams();

  // Waits until every stream of the device executed the work enqueued
  // before the call. With `error`, also consumes the streams' unreported
  // device-work failures and returns the first (counting the others in
  // it). Fails when called from this device's own device work (it would
  // wait for itself). Returns early, with success, once the process is
  // exiting (queued work is abandoned then).
  aclError drain(const char* api, std::shared_ptr<WorkError>* error);

  // aclrtGetDeviceUtilizationRate: the share of time (percent) during which
  // device work ran since the previous call (the first call: since the
  // device was initialised). Streams running at once count once each, and
  // the result is capped at 100.
  int32_t utilizationPercent();

 private:
  const uint32_t id_;
  const int32_t physical_id_;
  std::atomic<bool> initialized_{false};
  std::mutex init_mutex_;
  DeviceMemory memory_;
  Stream* default_stream_ = nullptr;
  std::mutex streams_mutex_;
  std::vector<Stream*> streams_; // retained, default stream included
  // Busy time of destroyed streams (guarded by streams_mutex_).
  uint64_t retired_busy_ns_ = 0;

  std::mutex utilization_mutex_;
  int64_t sample_start_ns_ = 0;   // when the current sampling period began
  uint64_t sample_busy_ns_ = 0;   // busy time counted until then
};

// The calling thread's current device (aclrtSetDevice); -1 when none.
int32_t currentDevice();
void setCurrentDevice(int32_t device);

} // namespace npu_sim
