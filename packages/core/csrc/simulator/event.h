// Events: markers recorded on streams.
//
// Every aclrtRecordEvent creates a new generation of the event, pending
// until the stream's worker reaches the marker. Queries, synchronization
// and stream waits refer to the latest generation at the time of the call,
// so re-recording an event never confuses an earlier waiter. Generations
// recorded on different streams may complete out of order; the pending set
// handles that exactly.
//
// Note [Device-work errors follow the dependencies]
// A failed work item's error stays with its stream until a synchronization
// reports it. A record after it carries the error (completeRecord), and a
// stream that waits for that record inherits it (Stream::inheritFailure,
// at the wait if queued, at aclrtStreamWaitEvent if the record was already
// reached). So work that depends on failed work, through any chain of
// events, surfaces the failure at the first synchronization that covers
// it, as on CANN: a consumer ordered after a failed producer by
// wait_stream raises at its .cpu() instead of reading unwritten memory.
// The error object is shared, and reported only once, by whichever
// synchronization comes first.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "acl_types.h"
#include "errors.h"

namespace npu_sim {

class IpcEventState;
class Stream;

class Event {
 public:
  static Event* create(uint32_t flags);
  // An event of another process (aclrtIpcOpenEventHandle; Note [IPC
  // events], ipc_event.h); takes `state` over.
  static Event* opened(IpcEventState* state);
  // The event behind a handle, or null when it is not a live event.
  static Event* fromHandle(aclrtEvent handle);

  aclrtEvent handle() {
    return this;
  }
  uint32_t flags() const {
    return flags_;
  }
  bool timing() const {
    return (flags_ & ACL_EVENT_TIME_LINE) != 0;
  }

  // Opened from another process: waits only, no records.
  bool isOpened() const {
    return opened_;
  }
  // aclrtIpcGetEventHandle: starts publishing this event's progress (once)
  // and returns the handle text.
  aclError exportState(std::string* handle);

  void retain() {
    refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void release();
  // aclrtDestroyEvent: the handle dies now; the object lives on while
  // queued work refers to it.
  void destroy();

  // Host side of aclrtRecordEvent: returns the new generation.
  uint64_t beginRecord();
  // The record of `generation` is item `item` of `stream`: a synchronizer
  // may drive that stream to it (see recorder()). Ignored unless it is
  // still the latest generation and pending.
  void noteRecorder(uint64_t generation, Stream* stream, uint64_t item);
  // The stream (retained: release() it) and item number of the pending
  // record of `generation`, or {nullptr, 0}. Waiting through the stream
  // (Stream::waitFor) lets the waiter run the record and the copies before
  // it itself when the stream's worker is idle, instead of waking it: an
  // event record + synchronize costs what a stream synchronize does.
  std::pair<Stream*, uint64_t> recorder(uint64_t generation);
  // Worker side: the marker was reached. `error` is the recording stream's
  // unreported device-work failure, if any.
  void completeRecord(uint64_t generation, std::shared_ptr<WorkError> error);

  // The unreported failure `generation` carries, when it is the latest
  // completed generation (a later one replaced what it knew); else null.
  std::shared_ptr<WorkError> errorOf(uint64_t generation);

  // Latest generation (0: never recorded).
  uint64_t latest();
  bool isComplete(uint64_t generation);
  // Blocks until `generation` completed: spins briefly, then sleeps.
  // Returns false only if the process started exiting meanwhile.
  bool wait(uint64_t generation);

  // The capture (model.h) holding this event's latest record, if any:
  // such an event has no generation outside the capture to wait for.
  class Model* capturedBy() const {
    return captured_by_.load(std::memory_order_acquire);
  }
  void setCapturedBy(class Model* model) {
    captured_by_.store(model, std::memory_order_release);
  }

  struct State {
    uint64_t latest;
    bool complete;
    int64_t timestamp_ns; // of the latest generation, when complete
    std::shared_ptr<WorkError> error;
  };
  State state();

 private:
  explicit Event(uint32_t flags) : flags_(flags) {}
  ~Event();
  bool completeLocked(uint64_t generation) const;
  // Publishes latest_ and the first pending generation when exported.
  void publishLocked();

  static constexpr uint32_t kMagic = 0x45564e54; // "EVNT"
  std::atomic<uint32_t> magic_{kMagic};
  const uint32_t flags_;
  std::atomic<int32_t> refs_{1};
  std::atomic<class Model*> captured_by_{nullptr};

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
  // The stream of the latest generation's pending record (retained) and
  // its item number there; null once that record ran.
  Stream* recorder_ = nullptr;
  uint64_t recorder_generation_ = 0;
  uint64_t recorder_item_ = 0;
  void dropRecorderLocked();
  // Note [IPC events]: the shared progress, of an exported or opened event.
  IpcEventState* ipc_ = nullptr;
  std::string ipc_handle_;
  bool opened_ = false;
};

} // namespace npu_sim
