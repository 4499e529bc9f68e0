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

// Moves up to `capacity` of the oldest records into `out`; returns how many.
size_t flush(npuSimActivityRecord* out, size_t capacity);

} // namespace npu_sim::activity
