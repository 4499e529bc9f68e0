// The simulator's process-wide state: configuration, address space, the
// device table and host memory, created at the first use of any function.
//
// Lifetime: never destroyed. At exit, worker threads are stopped (queued
// work is abandoned) and joined when they stop in time; any still inside
// long device work are detached, and because nothing is freed they keep
// running on valid state until the process ends.
//
// fork(): once a device was initialised, a child process cannot use the
// simulator (its worker threads and device memory do not exist there):
// every call fails with a message and nothing waits for threads at exit.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "acl_types.h"
#include "address_space.h"
#include "config.h"
#include "device.h"
#include "host_memory.h"

namespace npu_sim {

class Stream;

class Runtime {
 public:
  static Runtime& get();

  // ACL_SUCCESS, or the error (with message) that makes the simulator
  // unusable in this process: no address space, or a fork() child.
  aclError check(const char* api) const;

  const Config& config() const {
    return config_;
  }
  const AddressLayout& layout() const {
    return layout_;
  }
  uint32_t deviceCount() const {
    return static_cast<uint32_t>(devices_.size());
  }
  Device& device(uint32_t id) {
    return *devices_[id];
  }

  // A valid logical id, or ACL_ERROR_RT_INVALID_DEVICEID.
  aclError deviceById(int64_t id, const char* api, Device** out);
  // The calling thread's current device, or ACL_ERROR_RT_CONTEXT_NULL.
  aclError currentDevice(const char* api, Device** out);
  // A live stream; null means the current device's default stream.
  aclError stream(aclrtStream handle, const char* api, Stream** out);
  // Device memory of the window holding device address `p` (which must be
  // in the device range).
  DeviceMemory& windowMemory(uintptr_t p) {
    return devices_[layout_.windowOf(p)]->memory();
  }

  HostMemory& host() {
    return host_;
  }

  std::atomic<bool> acl_initialized{false};

 private:
  Runtime();

  const Config& config_;
  AddressLayout layout_;
  std::string init_error_;
  std::vector<std::unique_ptr<Device>> devices_;
  HostMemory host_;
};

// True once the process started exiting (atexit), or a worker thread was
// killed under us (pthread_exit from code the work called, e.g. a Python
// callback during interpreter shutdown): blocking waits then return at
// once, since the work they wait for will never run.
bool processExiting();
void markProcessExiting();
// A device was initialised: a fork() child cannot use the simulator.
void noteDeviceInitialized();

} // namespace npu_sim
