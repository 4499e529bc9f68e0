// Activity records: what device work ran, where and when (npu_sim_ext.h's
// npuSimActivity* functions). Recorded by the stream's executor as each item
// finishes; the cost while off is one relaxed load at enqueue and one at
// execution.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "npu_sim_ext.h"

namespace npu_sim::activity {

extern std::atomic<bool> g_enabled;

inline bool enabled() {
  return g_enabled.load(std::memory_order_relaxed);
}

void setEnabled(bool enabled);

// The calling thread's correlation id stack.
void pushCorrelation(uint64_t id);
bool popCorrelation(uint64_t* id);
// Its top, or 0 when empty.
uint64_t currentCorrelation();

void record(const npuSimActivityRecord& record);

// Note [Collective activity records]
// An HCCL collective runs as host-function work (hccl_api.cpp's launch());
// its record stays kind KERNEL, named after the HCCL call ("HcclAllReduce"),
// and also carries what a communication view needs: the bytes of the call's
// count (count x element size, see npuSimActivityRecord), the communicator's
// rank count and this rank, and the peer of point-to-point work. The running
// work hands these to its executor through the worker thread (set before the
// collective runs, taken by the executor right after), so the generic work
// item needs no collective fields, and nothing is kept while recording is off.
struct CollectiveDetail {
  uint64_t bytes = 0;
  uint32_t rank_count = 0;
  uint32_t rank = 0;
  int32_t peer = -1;
  int64_t wait_ns = 0; // Note [Collective wait times] (collective_comm.h)
  int64_t sync_ns = 0;
};

// Called by running collective work on its worker thread.
void setRunningCollective(const CollectiveDetail& detail);
// Takes (and clears) what the work just run set; false if it set nothing.
bool takeRunningCollective(CollectiveDetail* detail);

// Moves up to `capacity` of the oldest records into `out`; returns how many.
size_t flush(npuSimActivityRecord* out, size_t capacity);

} // namespace npu_sim::activity
