// The stream race detector (NPU_SIM_RACE_CHECK=1, npuSimRaceCheckEnable).
//
// Note [Stream race detection]
// Device work on two streams runs in any order unless something orders it
// (an event record + stream wait, a host synchronisation). Work that
// touches the same device memory without such an order races: the result
// depends on which worker runs first. With the detector on, every launch
// that declares the device memory it reads and writes (user work launched
// with npuSimLaunchWorkWithAccesses, which torch-npu's one launch path
// uses for every kernel; copies and memsets, whose ranges the simulator
// knows; HCCL collectives: send buffers read, receive buffers written) is
// checked against the accesses before it, on the launching thread, before the work is enqueued; a race fails the launch with
// ACL_ERROR_RT_FAILURE and a message naming both accesses (work name,
// stream, launch site), as PyTorch's CUDA sanitizer raises. The check
// follows the launch order the host sees, not the order the workers happen
// to run in, so a report does not depend on timing.
//
// Happens-before is tracked with vector clocks, one component per stream:
// - an item launched on stream S ticks S's own component; its accesses are
//   stamped (S, tick);
// - an event record on S snapshots S's clock into the event (the latest
//   record is what later waits and synchronisations refer to, as in
//   event.h); a stream wait on the event merges the snapshot into the
//   waiting stream's clock;
// - the host has a clock too: aclrtSynchronizeStream / Device / Event, and
//   a query reporting a stream or an event complete, merge the waited
//   work's clock into it, and every launch merges the host's clock into its
//   stream's (work launched after a synchronisation runs after the work
//   synchronised with). The caching allocator's record_stream reuse is
//   ordered this way: it reuses a block only once its own events query
//   complete.
// An access stamped (T, t) is ordered before work on S when S's clock has
// T-component >= t. A read conflicts with the last unordered write; a write
// with the last write and with every read since it (one per stream: a
// later read on a stream subsumes its earlier ones). Ranges are byte
// intervals of device memory (an interval map, split where accesses
// begin and end); aclrtFree and aclrtUnmapMem forget theirs.
//
// Synchronous aclrtMemcpy / aclrtMemset act on the caller's thread, in host
// order: they are checked as accesses of the host clock (hostAccess), so
// reading device memory a stream is still writing, without synchronising
// with it first, is reported; every later launch is ordered after them.
// A model keeps the declared accesses of the work captured into it (while
// the detector is on), and each replay checks them, and the captured event
// records and waits between its lanes, as if the items were launched then
// on the streams that replay them.
//
// Not tracked: work launched without declared accesses (npuSimLaunchWork,
// or npuSimLaunchWorkWithAccesses with none: in torch-npu, only work that
// touches no device memory, such as the graph random generator's replay
// base, markers and torch_npu._sleep), host memory, and models captured
// while the detector was off (their replays run unchecked). Inexact: a
// strided view of more than 64 dense runs is declared as its whole span
// (torch-npu's WorkAccesses.h), so a view interleaved with it on another
// stream is reported though no byte is shared. The host is
// one clock for all threads, so a synchronisation on one host thread also
// orders later launches of another. A wait the program needs on a device
// too (a data-dependent op's, which learns its result's size) and every
// launch's wait under ASCEND_LAUNCH_BLOCKING=1 order what follows, and can
// hide a race another run would have; the waits only the simulator does (an
// op's first call, waiting for its kernel to raise its errors at the call)
// use npuSimSynchronizeStreamUnordered and order nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "acl_types.h"
#include "npu_sim_ext.h"

namespace npu_sim {

class Event;
class Stream;

namespace race {

extern std::atomic<bool> g_enabled;

// The cost of the detector while off: one relaxed load per hook.
inline bool enabled() {
  return g_enabled.load(std::memory_order_relaxed);
}

// Turns the detector on when NPU_SIM_RACE_CHECK says so (once; before any
// explicit setEnabled).
void applyConfig();
// Turning the detector off forgets every tracked access and clock.
void setEnabled(bool enabled);
void setSiteProvider(npuSimLaunchSiteFn provider);

// Checks the accesses of work `name` about to be enqueued on `stream` and,
// when nothing races, records them and advances the stream's clock. On a
// race: sets the recent error message, records nothing and returns
// ACL_ERROR_RT_FAILURE. Ranges outside device memory are ignored.
aclError launch(Stream* stream, const char* name, const npuSimMemAccess* accesses, size_t count);

// As launch, for device memory the host itself reads and writes now
// (synchronous aclrtMemcpy / aclrtMemset): checked against the stream work
// the host has not synchronised with.
aclError hostAccess(const char* name, const npuSimMemAccess* accesses, size_t count);

void eventRecorded(Event* event, Stream* stream);
void streamWaitedEvent(Stream* stream, Event* event);
void hostWaitedStream(Stream* stream);
void hostWaitedEvent(Event* event);
void hostWaitedDevice(uint32_t device);
void memoryFreed(uintptr_t begin, uint64_t bytes);
void streamDestroyed(Stream* stream);
void eventDestroyed(Event* event);

} // namespace race
} // namespace npu_sim
