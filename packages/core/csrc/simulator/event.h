// Events: markers recorded on streams.
//
// Every aclrtRecordEvent creates a new generation of the event, pending
// until the stream's worker reaches the marker. Queries, synchronization
// and stream waits refer to the latest generation at the time of the call,
// so re-recording an event never confuses an earlier waiter. Generations
// recorded on different streams may complete out of order; the pending set
// handles that exactly.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "acl_types.h"
#include "errors.h"

namespace npu_sim {

class Event {
 public:
  static Event* create(uint32_t flags);
  // The event behind a handle, or null when it is not a live event.
  static Event* fromHandle(aclrtEvent handle);

  aclrtEvent handle() {
    return this;
  }
  bool timing() const {
    return (flags_ & ACL_EVENT_TIME_LINE) != 0;
  }

  void retain() {
    refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void release();
  // aclrtDestroyEvent: the handle dies now; the object lives on while
  // queued work refers to it.
  void destroy();

  // Host side of aclrtRecordEvent: returns the new generation.
  uint64_t beginRecord();
  // Worker side: the marker was reached. `error` is the recording stream's
  // unreported device-work failure, if any.
  void completeRecord(uint64_t generation, std::shared_ptr<WorkError> error);

  // Latest generation (0: never recorded).
  uint64_t latest();
  bool isComplete(uint64_t generation);
  // Blocks until `generation` completed: spins briefly, then sleeps.
  // Returns false only if the process started exiting meanwhile.
  bool wait(uint64_t generation);

  struct State {
    uint64_t latest;
    bool complete;
    int64_t timestamp_ns; // of the latest generation, when complete
    std::shared_ptr<WorkError> error;
  };
  State state();

 private:
  explicit Event(uint32_t flags) : flags_(flags) {}
  bool completeLocked(uint64_t generation) const;

  static constexpr uint32_t kMagic = 0x45564e54; // "EVNT"
  std::atomic<uint32_t> magic_{kMagic};
  const uint32_t flags_;
  std::atomic<int32_t> refs_{1};

  std::mutex mutex_;
  std::condition_variable cv_;
  uint32_t waiters_ = 0;
  uint64_t latest_ = 0;
  uint64_t completed_max_ = 0;
  std::vector<uint64_t> pending_; // generations enqueued, not reached yet
  // Mirrors pending_.size(): lets the common "nothing pending" check and
  // the spin loop run without the lock.
  std::atomic<uint32_t> pending_count_{0};
  int64_t timestamp_ns_ = 0;
  std::shared_ptr<WorkError> error_;
};

} // namespace npu_sim
