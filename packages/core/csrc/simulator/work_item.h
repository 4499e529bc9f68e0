// A unit of work on a stream. Plain data, so that a future capture mode
// can store items and replay them instead of running them at once.
//
// References: Record/Wait items hold one reference to their event, taken
// when enqueued and dropped after execution (so aclrtDestroyEvent while a
// record is pending is safe). UserWork owns its npuSimWork until release
// is called after run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <variant>

#include "npu_sim_ext.h"

namespace npu_sim {

class Event;

// Addresses are host-accessible (already translated by the access delta).
struct CopyWork {
  void* dst;
  const void* src;
  size_t count;
  uint64_t correlation = 0; // activity.h: set at enqueue while recording
};

struct MemsetWork {
  void* dst;
  size_t count;
  int value;
  uint64_t correlation = 0;
};

// Completes generation `generation` of `event` and takes its timestamp.
struct RecordWork {
  Event* event;
  uint64_t generation;
};

// Blocks the stream until generation `generation` of `event` completed.
// An implied wait (Note [Implied stream waits], stream.cpp) does not block:
// its record has nothing left to wait for once this stream gets here, so it
// completes that record (if its own stream has not yet) before going on.
struct WaitWork {
  Event* event;
  uint64_t generation;
  bool implied = false;
};

struct UserWork {
  npuSimWork work;
  uint64_t id;
  uint64_t correlation = 0;
};

using WorkItem = std::variant<CopyWork, MemsetWork, RecordWork, WaitWork, UserWork>;

// What a launch declared it reads and writes (Note [Stream race
// detection], race_detector.h), kept by a capturing model so that its
// replays are checked too. Device addresses; `name` has static storage.
struct DeclaredAccesses {
  const char* name;
  const npuSimMemAccess* accesses;
  size_t count;
};

} // namespace npu_sim
