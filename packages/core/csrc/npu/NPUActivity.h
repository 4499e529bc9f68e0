// Device activity: what device work ran, on which stream, when, for which
// host op. The runtime records it where work executes; a profiler turns it
// into a timeline (torch-npu-profiler builds on this, as Kineto builds on
// CUPTI's activity API and OpenReg's tracer on its runtime).
//
// Note [Device activity records]
// Off by default, and then free: the runtime pays one relaxed load per
// launch and per executed item. While on, every item that runs (host-work
// kernels, copies, memsets) leaves a Record when it finishes, in the order
// items finish, kept until flush() takes it. A host op that wants its device
// work attributed pushes a correlation id around its launches; each item
// records the top of its launching thread's stack. Timestamps are
// CLOCK_MONOTONIC nanoseconds (std::chrono::steady_clock on Linux); torch's
// profilers count Unix-epoch nanoseconds (c10::getTime()), so a consumer
// that merges both shifts these by (c10::getTime() - steady now), sampled
// once per session (NPUKinetoProfiler.cpp does). Available on the
// simulator; on CANN the equivalent is msprof's, which this API does not
// wrap yet (is_available() is false there).
//
// A simulated HCCL collective is a Kernel record named after the call
// ("HcclAllReduce") that also carries its bytes, the communicator's rank
// count, this rank and the point-to-point peer (Note [Collective activity
// records] in simulator/activity.h).
//
// Besides the runtime's records, the host may add its own (record_host):
// mstx marks and ranges (NPUMstx.h, Kind::Mstx). flush() returns both
// kinds together, ordered by end time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "cann/acl_types.h"
#include "npu/Macros.h"

namespace c10_npu::activity {

enum class Kind : uint32_t {
  Kernel = 1, // host-function device work (a kernel on CANN)
  Memcpy = 2,
  Memset = 3,
  Mstx = 4, // an mstx mark or range (NPUMstx.h); not the simulator's
};

struct Record {
  std::string name; // the work's name ("aten::add", "aten::copy_"), "memcpy" or "memset"
  Kind kind;
  c10::DeviceIndex device;
  aclrtStream stream; // the runtime's stream handle (NPUStream::stream())
  uint64_t work_id; // the id launch_work returned; 0 for copies and memsets
  uint64_t correlation_id; // 0: none pushed at launch
  int64_t start_ns;
  int64_t end_ns;
  uint64_t bytes; // copied or set; a collective's count x element size; else 0
  // Mstx records: the mstx domain, and the native id (gettid) of the thread
  // that called mstx. Empty and 0 for the runtime's records.
  std::string domain;
  uint64_t thread_id = 0;
  // Collectives (kind Kernel, named after the HCCL call: Note [Collective
  // activity records] in simulator/activity.h): the communicator's rank count
  // (0: not a collective), this rank, and the peer of point-to-point work
  // (-1: none).
  uint32_t rank_count = 0;
  uint32_t rank = 0;
  int32_t peer_rank = -1;
  // Collectives: how long this rank waited for its peers, in all and before
  // any data moved (Note [Collective wait times] in simulator/collective_comm.h).
  int64_t wait_ns = 0;
  int64_t sync_ns = 0;
};

// Whether the loaded runtime records activity.
TORCH_NPU_API bool is_available();

// Turns recording on or off (records kept so far stay until flushed).
// Throws when the runtime cannot record.
TORCH_NPU_API void enable(bool on);

// Whether recording is on: one relaxed load, for callers (mstx) that skip
// work while it is off.
TORCH_NPU_API bool is_enabled();

// Adds a record made outside the runtime (Kind::Mstx); dropped while
// recording is off.
TORCH_NPU_API void record_host(Record record);

// The calling thread's correlation ids; pop returns the id pushed last.
TORCH_NPU_API void push_correlation_id(uint64_t id);
TORCH_NPU_API uint64_t pop_correlation_id();

// Note [Kineto correlation for torch_npu.profiler]
// torch_npu.profiler owns the records (it enabled them) and runs torch's
// profiler for the host ops. Rather than a second RecordFunction callback
// of its own (NPUHostOpActivity.h), it can let torch's profiler number the
// ops: with ProfilerActivity.PrivateUse1 in that profiler, Kineto calls the
// npu plugin's pushCorrelationId/popCorrelationId around every op, with the
// id the op's event carries as "External id" in torch's trace. A plugin
// session that starts while recording is on and forwarding is asked for
// pushes those ids onto the runtime's correlation stack and collects
// nothing itself (NPUKinetoProfiler.cpp); otherwise a session that finds
// recording on stays empty. kineto_plugin_registered() says whether this
// build has the plugin at all.
TORCH_NPU_API void forward_kineto_correlation(bool on);
TORCH_NPU_API bool forwarding_kineto_correlation();
TORCH_NPU_API void note_kineto_plugin_registered();
TORCH_NPU_API bool kineto_plugin_registered();

// Takes every record made so far, the runtime's and the host's, ordered by
// end time. Work still queued records when it runs: synchronise first to
// include it.
TORCH_NPU_API std::vector<Record> flush();

} // namespace c10_npu::activity
