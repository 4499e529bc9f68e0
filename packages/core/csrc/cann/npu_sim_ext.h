// Functions the NPU simulator offers beyond CANN's runtime API.
//
// Real CANN runs device work as compiled kernels (aclnn, aclop); the
// simulator instead runs host functions on a stream's worker thread, on
// device memory. These entry points are resolved at run time like the acl
// functions; on real CANN they are absent, and torch-npu uses CANN's own
// kernels there.
#pragma once

#include <stddef.h>

#include "acl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

// One piece of device work. The simulator calls `run(ctx)` on the worker
// thread of the stream it was launched on, after all earlier work of that
// stream, and calls `release(ctx)` exactly once when it no longer needs the
// work (right after run, or when a captured model holding it is destroyed:
// captured work may run many times before it is released).
//
// `run` returns ACL_SUCCESS or an error; before failing it may call
// npuSimSetWorkError with a message. A failure is reported (error code
// ACL_ERROR_RT_AICORE_EXCEPTION and aclGetRecentErrMsg naming the work) by
// the next synchronizing call on that stream or device.
//
// `flags` (0 or NPU_SIM_WORK_AWAITED): an awaited work item is one its
// launcher synchronizes with right after launching it (an op whose result
// the host needs at once). When every earlier work of the stream is done,
// the synchronizing thread runs it itself, still in stream order: handing
// it to the worker thread would cost a wake-up and the waiter's spinning
// would take a CPU from the work.
typedef struct npuSimWork {
  const char* name; // kernel name, static storage; shows in errors/profiles
  aclError (*run)(void* ctx);
  void (*release)(void* ctx); // may be null
  void* ctx;
  uint32_t flags;
} npuSimWork;

#define NPU_SIM_WORK_AWAITED 0x1u
// The runtime's own bookkeeping (a profiler's timestamp on the stream), not
// device work: runs in stream order and leaves no activity record.
#define NPU_SIM_WORK_UNTRACED 0x2u

// Enqueues `work` on `stream` (null: the current device's default stream).
// `workId`, when not null, receives a process-unique id of this launch.
aclError npuSimLaunchWork(aclrtStream stream, const npuSimWork* work,
                          uint64_t* workId);

// Sets the message of the error the running work is about to return.
void npuSimSetWorkError(const char* message);

// Offset to add to a device address to get an address the host may
// dereference inside device work. Zero unless the memory checker is on, in
// which case device addresses themselves are inaccessible to the host.
// Constant for the life of the process.
aclError npuSimGetHostAccessOffset(intptr_t* offset);

// Device ordinal and stream priority of a stream (null: default stream of
// the current device).
aclError npuSimStreamGetDevice(aclrtStream stream, int32_t* deviceId);

// ---- Activity records (what a profiler shows as device activity) ----
//
// Off by default. While on, every piece of device work the simulator runs
// (host-function work, copies, memsets) leaves a record when it finishes,
// kept until npuSimActivityFlush takes it. Launching threads may push
// correlation ids (a profiler's id of the host op that launched the work):
// a work item records the top of its launching thread's stack at launch.
#define NPU_SIM_ACTIVITY_KERNEL 1u
#define NPU_SIM_ACTIVITY_MEMCPY 2u
#define NPU_SIM_ACTIVITY_MEMSET 3u

typedef struct npuSimActivityRecord {
  const char* name; // static storage: the work's name, "memcpy" or "memset"
  uint32_t kind; // NPU_SIM_ACTIVITY_*
  int32_t deviceId;
  aclrtStream stream;
  uint64_t workId; // npuSimLaunchWork's id; 0 for copies and memsets
  uint64_t correlationId; // 0: none pushed at launch
  int64_t startNs; // steady clock (CLOCK_MONOTONIC), nanoseconds
  int64_t endNs;
  uint64_t bytes; // copied or set; for a collective, see rankCount; else 0
  // Collectives (HCCL work, Note [Collective activity records] in
  // simulator/activity.h): the communicator's rank count and this rank;
  // peerRank is the other rank of an HcclSend/HcclRecv (or of a batch whose
  // items all name one peer), -1 otherwise. bytes is then the data the
  // collective's count describes: count x element size of the call (the
  // per-rank buffer of all-reduce, reduce, broadcast, all-gather's send
  // count, reduce-scatter's receive count; the sum of the sent counts of
  // all-to-all; the sum of the items of a batch). rankCount 0: not a
  // collective.
  uint32_t rankCount;
  uint32_t rank;
  int32_t peerRank;
  // Collectives: of the time between startNs and endNs, how long this rank
  // waited for its peers in all (waitNs) and, of that, before any data moved
  // (syncNs: the wait for every rank to arrive, or for a point-to-point
  // peer's first handshake). Note [Collective wait times] in
  // simulator/collective_comm.h. 0 for other work.
  int64_t waitNs;
  int64_t syncNs;
} npuSimActivityRecord;

// Turns recording on (non-zero) or off; records kept so far stay.
aclError npuSimActivityEnable(int enable);

// The calling thread's correlation id stack.
aclError npuSimActivityPushCorrelationId(uint64_t id);
aclError npuSimActivityPopCorrelationId(uint64_t* id);

// Moves up to `capacity` records (oldest first) into `records`; `*count`
// receives how many. Call again while it fills the capacity.
aclError npuSimActivityFlush(npuSimActivityRecord* records, size_t capacity, size_t* count);

// ---- Stream race detection (Note [Stream race detection], race_detector.h) ----
//
// Off by default; NPU_SIM_RACE_CHECK=1 turns it on at start. While on, a
// launch whose device memory accesses race with earlier work on another
// stream (nothing orders the two) fails with ACL_ERROR_RT_FAILURE and a
// message naming both; the work is not enqueued.

// One range of device memory a piece of work reads or writes.
typedef struct npuSimMemAccess {
  const void* ptr; // device address
  size_t bytes;
  uint32_t write; // 0: only read; 1: written (read-modify-write included)
} npuSimMemAccess;

// Turns the detector on (non-zero) or off; turning it off forgets what it
// tracked.
aclError npuSimRaceCheckEnable(int enable);
aclError npuSimRaceCheckEnabled(int* enabled);

// As npuSimLaunchWork, declaring what the work reads and writes (checked
// and recorded while the detector is on; ignored while it is off).
aclError npuSimLaunchWorkWithAccesses(aclrtStream stream, const npuSimWork* work,
                                      const npuSimMemAccess* accesses, size_t count,
                                      uint64_t* workId);

// As aclrtSynchronizeStream, except that the race detector does not count
// the wait as ordering later launches after the stream's work: for waits a
// device would not do, which torch-npu does only on the simulator (an op's
// first call waits for its kernel to raise its errors at the call), so
// they do not hide the races the program has on a device.
aclError npuSimSynchronizeStreamUnordered(aclrtStream stream);

// Where the calling thread launches work from ("train.py:42"), or null.
// Called on the launching thread at each tracked launch while the detector
// is on, before the detector takes its lock; the simulator copies the text,
// which must stay valid until the provider's next call on that thread.
typedef const char* (*npuSimLaunchSiteFn)(void);
aclError npuSimRaceCheckSetSiteProvider(npuSimLaunchSiteFn provider);

// ---- The simulated HCCL ----
//
// Whether the communicator `comm` (an HcclComm) reads its peers' device
// buffers directly (*direct = 1) or moves collective data through shared
// transfer buffers (0): Note [Direct collectives] in collective_comm.cpp.
// Returns an HcclResult (0: success).
int npuSimHcclCommIsDirect(void* comm, uint32_t* direct);

// How the communicator `comm` (an HcclComm) moves collective data:
// *transport = 1 through shared transfer buffers (staging), 2 reading the
// peers' device buffers with cross-memory attach, 3 reading them through
// mappings of the peers' device memory (the ranks' heaps are shared: Note
// [Device heap kind] in config.cpp), 4 over TCP between machines. Note
// [Direct collectives] in collective_comm.cpp. Returns an HcclResult.
int npuSimHcclCommTransport(void* comm, uint32_t* transport);

// Whether the ranks of the communicator `comm` (an HcclComm) meet over TCP
// (*sockets = 1: they run on several machines, Note [Socket transport] in
// socket_transport.cpp) or through shared memory of one machine (0).
// Returns an HcclResult (0: success).
int npuSimHcclCommUsesSockets(void* comm, uint32_t* sockets);

// Describes the simulator configuration in effect, e.g.
// "devices=8 capacity=17179869184 checker=on cann=9.0.0". Never null.
const char* npuSimDescribe(void);

#ifdef __cplusplus
} // extern "C"
#endif
