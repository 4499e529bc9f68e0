// Host ops for device activity: which aten op (or user range) launched each
// piece of device work, and when that op ran on its host thread.
//
// Note [Host op correlation ids]
// While host-op recording is on, a RecordFunction callback gives every op a
// fresh correlation id, pushes it on the activity correlation stack of the
// calling thread at the op's start (Note [Device activity records]) and pops
// it at the op's end. Device work records the top of that stack when it is
// launched, so a kernel is attributed to the innermost op that launched it
// (aten::copy_ inside aten::to, not aten::to). At the op's end a HostOp is
// kept: its name, id, thread and start/end on CLOCK_MONOTONIC, the clock of
// the device records. The callback is thread-local, as Kineto's own, so it
// sees the threads torch's profiler sees (the starting thread and the
// threads it hands its thread-local state to, such as autograd's device
// threads); torch_npu.profiler matches these HostOps to Kineto's op events
// by thread, name and start time. Off (the default), no callback is
// registered: ops pay nothing. Switch it on and off on the same thread.
// torch_npu.profiler uses it only when torch's profiler does not number the
// ops itself (Note [Kineto correlation for torch_npu.profiler], NPUActivity.h):
// NPU activity without CPU activity, or a build without the Kineto plugin.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npu/Macros.h"

namespace c10_npu::activity {

struct HostOp {
  std::string name;
  uint64_t correlation_id;
  uint64_t thread_id; // at::RecordFunction::currentThreadId(), Kineto's start_thread_id
  int64_t os_thread_id; // the kernel's thread id (gettid)
  int64_t start_ns; // CLOCK_MONOTONIC
  int64_t end_ns;
};

// Registers (on) or removes (off) the calling thread's host-op callback.
// Turning it on twice, or off on a thread that did not turn it on, throws.
TORCH_NPU_API void record_host_ops(bool on);

// Whether the calling thread has the callback registered.
TORCH_NPU_API bool recording_host_ops();

// Takes every HostOp that ended so far, in the order they ended.
TORCH_NPU_API std::vector<HostOp> flush_host_ops();

} // namespace c10_npu::activity
