// Device-level runtime functions: device count, the per-thread current
// device, lazy initialisation, synchronisation, fork safety.
#pragma once

#include <functional>
#include <string>

#include <c10/core/Device.h>

#include "npu/Macros.h"

namespace c10_npu {

// Upper bound on devices per process (storage for per-device tables).
constexpr c10::DeviceIndex kMaxDevices = 64;

// Number of visible devices. Never throws and never initialises a device or
// starts a thread: 0 when no runtime can be loaded.
TORCH_NPU_API c10::DeviceIndex device_count() noexcept;

// Throws the one "invalid device index" message used everywhere (set_device,
// factories, generators, map_location, streams) unless 0 <= index < count.
TORCH_NPU_API void check_device_index(c10::DeviceIndex index);

// The calling thread's current device (0 unless set), like CUDA.
TORCH_NPU_API c10::DeviceIndex current_device();

// Sets the calling thread's current device and initialises it.
TORCH_NPU_API void set_device(c10::DeviceIndex index);

// Sets the device and returns the previous one; -1 is a no-op.
TORCH_NPU_API c10::DeviceIndex exchange_device(c10::DeviceIndex index);

// Makes `index` the runtime's device for this thread (acl calls need it) and
// initialises the device on first use. Cheap when already current.
TORCH_NPU_API void ensure_device_context(c10::DeviceIndex index);

// Whether the device has been initialised in this process.
TORCH_NPU_API bool is_device_initialized(c10::DeviceIndex index);

// One-time process initialisation (aclInit). Throws the fork error in a
// forked child of a process that had initialised the NPU.
TORCH_NPU_API void lazy_init();
TORCH_NPU_API bool is_initialized();

// Runs `callback` once this process has initialised the runtime (at once if
// it already has), on the thread that initialised it and after lazy_init's
// own work: a callback may take the GIL or call back into the runtime.
// Plugins use it to start work that only a process using the device needs
// (ops: Note [Python meta kernels and the first op]). A callback must not
// throw.
TORCH_NPU_API void call_after_init(std::function<void()> callback);
TORCH_NPU_API bool is_in_bad_fork();

// Path of the library that serves CANN's runtime API in this process
// (libascendcl.so, or the embedded simulator); loads it on first call.
TORCH_NPU_API std::string runtime_library();

// Waits for all work of every stream of `index` (current device if -1).
TORCH_NPU_API void device_synchronize(c10::DeviceIndex index = -1);

// ASCEND_LAUNCH_BLOCKING=1: every enqueue is followed by a synchronisation,
// so errors surface at the call that caused them.
TORCH_NPU_API bool launch_blocking();

} // namespace c10_npu
