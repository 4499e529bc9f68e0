// Streams: an in-order queue of work executed by the stream's own worker
// thread.
//
// Enqueue is the hot path (every device op of PyTorch goes through it):
// producers append to a WorkQueue (work_queue.h), touching no cache line
// the worker writes; the worker spins for a few tens of microseconds after
// draining before it sleeps, and producers only signal it when it sleeps.
// Completion is a counter of executed items; synchronizers spin briefly
// on it, then sleep on a condition variable the worker signals only when
// somebody sleeps there. Two exceptions spare a synchronizer the wake-ups
// (100-250 us each on a VM with an idle virtual CPU): when the worker is
// idle, the synchronizer runs the leading copies, memsets and event records
// it waits for itself (one consumer at a time, so order is kept); while
// the worker is in a large copy due to end soon, it yields instead of
// sleeping.
//
// The worker starts at the first enqueue, not at creation, so that unused
// streams cost no thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "acl_types.h"
#include "errors.h"
#include "util.h"
#include "work_item.h"
#include "work_queue.h"

namespace npu_sim {

// Process-unique, increasing ids of launched work (npuSimLaunchWork).
uint64_t nextWorkId();

class Stream {
 public:
  Stream(uint32_t device, uint32_t priority, uint32_t flags, bool is_default);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // The stream behind a non-null handle, or null when it is not a live
  // stream.
  static Stream* fromHandle(aclrtStream handle);
  aclrtStream handle() {
    return this;
  }
  // The stream whose worker runs the calling thread, if any.
  static Stream* current();

  uint32_t device() const {
    return device_;
  }
  uint32_t priority() const {
    return priority_;
  }
  bool isDefault() const {
    return is_default_;
  }

  void retain() {
    refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void release();

  // Starts the worker if needed (not once the process is exiting); call
  // before building an item that takes references, so that enqueue itself
  // cannot fail.
  aclError ensureWorker();
  // Appends an item; ensureWorker must have succeeded. Returns its number
  // (1-based, as enqueued()): waitFor(number) waits until it ran.
  uint64_t enqueue(const WorkItem& item, const DeclaredAccesses* accesses = nullptr);

  // Appends an event record (`wait` false) or a wait for an event whose
  // pending record is on `waits_on` (null: unknown), as enqueue() does, and
  // keeps track of the run of such markers at the end of the queue (Note
  // [Implied stream waits]).
  uint64_t enqueueMarker(const WorkItem& item, bool wait, const Stream* waits_on);
  // Whether item `item` (1-based) of this stream, an event record, depends
  // only on work already enqueued on `on` or already done, so that `on`
  // waiting for it is implied by `on`'s own order (Note [Implied stream
  // waits]).
  bool impliedBy(uint64_t item, const Stream* on);

  // The model capturing this stream's work (model.h), or null. While set,
  // enqueue appends host-function work, copies and memsets to it instead
  // of queueing them (and returns 0), with their declared `accesses` (null
  // while the race detector is off); records and waits are the caller's.
  class Model* capture() const {
    return capture_.load(std::memory_order_acquire);
  }
  void setCapture(class Model* model) {
    capture_.store(model, std::memory_order_release);
  }

  // Number of items enqueued so far; waitFor(enqueued()) drains.
  uint64_t enqueued() const {
    return queue_.published();
  }
  bool reached(uint64_t target) const {
    return completed_.load(std::memory_order_acquire) >= target;
  }
  // Blocks until `target` items executed. False when the process started
  // exiting meanwhile (the work is abandoned: callers report success).
  bool waitFor(uint64_t target);

  // The unreported device-work failure, if any, without consuming it.
  std::shared_ptr<WorkError> pendingError();
  // Consumes the unreported failure (the caller claims and reports it).
  std::shared_ptr<WorkError> takeError();
  // Worker side: device work returned `code`.
  void recordFailure(const npuSimWork& work, aclError code);
  // The stream waited for an event recorded after unreported failed work
  // (on another stream): that failure is now this stream's too, so a
  // synchronization that depends on the wait reports it (once, whoever
  // asks first: the error is shared). An own unreported failure stays the
  // one reported.
  void inheritFailure(std::shared_ptr<WorkError> error);
  // Worker side: copies or sets `count` bytes with `fn`, publishing when a
  // large range should be done (see kWaiterBulkSpin).
  template <typename Fn>
  void runBulk(size_t count, Fn&& fn);

  // Nanoseconds this stream spent executing work up to `now` (nowNs()),
  // the item in progress included; approximate while work runs.
  uint64_t busyNs(int64_t now) const {
    const int64_t since = busy_since_ns_.load(std::memory_order_relaxed);
    return busy_ns_.load(std::memory_order_relaxed) +
        (since != 0 && now > since ? static_cast<uint64_t>(now - since) : 0);
  }

  // aclrtDestroyStream: waits for queued work, then stops and joins the
  // worker. `deleted` afterwards by the last release().
  void destroy();

  // Process exit: ask the worker to stop after its current item, abandoning
  // the rest; then join it if it stopped by `deadline_ns`, else detach it.
  void requestExit();
  void finishExit(int64_t deadline_ns);
  bool workerExited() const {
    return worker_exited_.load(std::memory_order_acquire);
  }

 private:
  void workerMain();
  // Worker: waits until there is work to run (true) or the worker must
  // stop (false).
  bool awaitWork();
  bool hasWork() const {
    return queue_.published() != completed_.load(std::memory_order_seq_cst);
  }
  void wakeWorker();
  void execute(WorkItem& item);
  // Consumer: `done` items have run; wakes waiters whose target it reaches.
  void publishCompleted(uint64_t done);
  void notifyWaiters();
  // Waiter side: yields while the worker is in a large copy expected to
  // end soon, or about to start the last one (Note [Yield only through a
  // copy that is due]); true once `target` is reached.
  bool yieldThroughBulk(uint64_t target);
  // Waiter side: when the worker is idle, runs the leading copies, memsets
  // and event records that `target` needs on the calling thread; false if
  // it ran nothing.
  bool runQueuedHere(uint64_t target);

  static constexpr uint32_t kMagic = 0x5354524d; // "STRM"
  std::atomic<uint32_t> magic_{kMagic};
  const uint32_t device_;
  const uint32_t priority_;
  const uint32_t flags_;
  const bool is_default_;
  const uint32_t serial_;
  std::atomic<int32_t> refs_{1};

  // The groups below are written by different threads (producers, the
  // worker, failing work): each starts a cache line of its own, so that the
  // worker counting a finished item does not take a line a producer needs.

  // ---- producers -> worker ----
  WorkQueue queue_;
  // Rarely written, read by every producer: a line of its own.
  alignas(kCacheLine) std::atomic<bool> worker_sleeping_{false};
  std::atomic<bool> stop_{false};    // destroy(): queued work is done
  std::atomic<bool> abandon_{false}; // process exit: drop queued work
  std::atomic<bool> started_{false};
  std::atomic<bool> worker_exited_{false};
  std::atomic<class Model*> capture_{nullptr};
  std::mutex start_mutex_;
  std::mutex sleep_mutex_;
  std::condition_variable worker_cv_;
  std::thread worker_;
  // Held by whoever executes items: the worker, or a synchronizer running
  // leading items itself; never both, so items run in order.
  std::mutex consumer_mutex_;

  // ---- worker -> synchronizers ----
  alignas(kCacheLine) std::atomic<uint64_t> completed_{0};
  // Smallest `completed_` a sleeping synchronizer waits for (UINT64_MAX:
  // nobody sleeps), so the worker signals only when it matters.
  std::atomic<uint64_t> wake_target_{UINT64_MAX};
  std::mutex done_mutex_;
  std::condition_variable done_cv_;
  // Estimated end (nowNs) of the large copy or memset the worker is in; 0
  // when it is in none. Cleared before the item counts as completed.
  std::atomic<int64_t> bulk_end_ns_{0};
  // Number (1-based, as enqueued()) of the last large item enqueued.
  std::atomic<uint64_t> last_bulk_item_{0};
  // Recent copy speed (start: 10 GB/s); used by whoever executes items,
  // worker or synchronizer, which the consumer mutex orders.
  double bulk_ns_per_byte_ = 0.1;
  // Time spent executing items, for the device's utilization: kept per run
  // of consecutive items (two clock reads per run, not per item) by
  // whoever holds the consumer mutex.
  std::atomic<uint64_t> busy_ns_{0};
  std::atomic<int64_t> busy_since_ns_{0}; // start of the current run; 0: idle
  void beginBusy() {
    busy_since_ns_.store(nowNs(), std::memory_order_relaxed);
  }
  void endBusy() {
    const int64_t since = busy_since_ns_.exchange(0, std::memory_order_relaxed);
    busy_ns_.fetch_add(static_cast<uint64_t>(nowNs() - since), std::memory_order_relaxed);
  }

  // ---- producers: the run of markers at the end of the queue ----
  // Note [Implied stream waits]. Items base+1 .. base+markers are event
  // records and waits; the waits are on records of `waits_on` (null: none
  // yet) unless `mixed`.
  struct MarkerRun {
    uint64_t base = 0;
    uint64_t markers = 0;
    const Stream* waits_on = nullptr;
    bool mixed = false;
  };
  std::mutex marker_mutex_;
  MarkerRun marker_run_; // guarded by marker_mutex_

  // ---- device-work failures ----
  alignas(kCacheLine) std::atomic<bool> has_error_{false};
  std::mutex error_mutex_;
  std::shared_ptr<WorkError> error_; // guarded by error_mutex_
};

} // namespace npu_sim
