#include "stream.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <system_error>
#include <type_traits>

#include "activity.h"
#include "checker_signal.h"
#include "device.h"
#include "event.h"
#include "model.h"
#include "runtime.h"
#include "util.h"

namespace npu_sim {
namespace {

std::atomic<uint32_t> g_next_serial{0};
thread_local Stream* tls_worker_stream = nullptr;

constexpr uint64_t kNobodyWaits = UINT64_MAX;

// Items a synchronizer may run itself: plain data movement and event
// records, which behave the same on any thread. User work may rely on
// running on the worker (its device, its signal context); event waits
// could block the synchronizer on other streams.
bool isAwaited(const WorkItem& item) {
  const auto* user = std::get_if<UserWork>(&item);
  return user != nullptr && (user->work.flags & NPU_SIM_WORK_AWAITED) != 0;
}

// Work a synchronizer may run itself when the worker is idle.
bool isStealable(const WorkItem& item) {
  return std::holds_alternative<CopyWork>(item) || std::holds_alternative<MemsetWork>(item) ||
      std::holds_alternative<RecordWork>(item) || isAwaited(item);
}

bool isBulk(const WorkItem& item) {
  if (const auto* copy = std::get_if<CopyWork>(&item)) {
    return copy->count >= kBulkBytes;
  }
  if (const auto* memset = std::get_if<MemsetWork>(&item)) {
    return memset->count >= kBulkBytes;
  }
  return false;
}

void copyBytes(void* dst, const void* src, size_t count) {
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  if (d < s + count && s < d + count) {
    std::memmove(dst, src, count);
  } else {
    std::memcpy(dst, src, count);
  }
}

// Lowers the scheduling priority of the calling thread by `steps` nice
// levels. Raising it would need privileges, so low-priority streams are
// niced and priority 0 (the highest) is left alone.
void lowerThreadPriority(uint32_t steps) {
  if (steps == 0) {
    return;
  }
  const pid_t tid = static_cast<pid_t>(gettid());
  errno = 0;
  const int current = getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  if (errno == 0) {
    setpriority(PRIO_PROCESS, static_cast<id_t>(tid),
                std::min(19, current + static_cast<int>(steps)));
  }
}

} // namespace

uint64_t nextWorkId() {
  static std::atomic<uint64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) + 1;
}

Stream::Stream(uint32_t device, uint32_t priority, uint32_t flags, bool is_default)
    : device_(device),
      priority_(priority),
      flags_(flags),
      is_default_(is_default),
      serial_(g_next_serial.fetch_add(1, std::memory_order_relaxed)) {}

Stream::~Stream() {
  // destroy() or finishExit() joined or detached the worker already.
  if (worker_.joinable()) {
    worker_.detach();
  }
}

Stream* Stream::fromHandle(aclrtStream handle) {
  auto* stream = static_cast<Stream*>(handle);
  if (stream == nullptr || stream->magic_.load(std::memory_order_relaxed) != kMagic) {
    return nullptr;
  }
  return stream;
}

Stream* Stream::current() {
  return tls_worker_stream;
}

void Stream::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete this;
  }
}

// ---------------------------------------------------------------------------
// Producer side

aclError Stream::ensureWorker() {
  if (started_.load(std::memory_order_acquire)) {
    return ACL_SUCCESS;
  }
  std::lock_guard lock(start_mutex_);
  if (started_.load(std::memory_order_relaxed)) {
    return ACL_SUCCESS;
  }
  if (processExiting()) {
    // Work enqueued now is abandoned like the rest (see runtime.h); no
    // thread starts, and synchronizing calls return at once.
    return ACL_SUCCESS;
  }
  try {
    worker_ = std::thread([this] { workerMain(); });
  } catch (const std::system_error& e) {
    return fail(ACL_ERROR_RT_RESOURCE_ALLOC_FAIL,
                "could not start the worker thread of a stream on device %u: %s", device_,
                e.what());
  }
  started_.store(true, std::memory_order_release);
  return ACL_SUCCESS;
}

namespace {

// Work that leaves activity records carries its launcher's correlation id.
template <typename Work>
void setCorrelation(Work& work, uint64_t id) {
  if constexpr (std::is_same_v<Work, CopyWork> || std::is_same_v<Work, MemsetWork> ||
                std::is_same_v<Work, UserWork>) {
    work.correlation = id;
  }
}

} // namespace

uint64_t Stream::enqueue(const WorkItem& item, const DeclaredAccesses* accesses) {
  if (Model* model = capture_.load(std::memory_order_acquire); __builtin_expect(model != nullptr, 0)) {
    model->append(this, item, accesses);
    return 0;
  }
  uint64_t number;
  if (__builtin_expect(activity::enabled(), 0)) {
    // The launching thread's correlation id rides with the item.
    WorkItem traced = item;
    std::visit([](auto& w) { setCorrelation(w, activity::currentCorrelation()); }, traced);
    number = queue_.push(traced);
  } else {
    number = queue_.push(item);
  }
  if (isBulk(item)) {
    last_bulk_item_.store(number, std::memory_order_release);
  }
  // No fence between publishing and this load (it would cost a round trip
  // between cores per item): a worker going to sleep at this very moment
  // can miss the item, which its first, short sleep bounds (awaitWork).
  // Awaited work is left to its launcher, who synchronizes next and wakes
  // the worker only if it cannot run the work itself.
  if (!isAwaited(item) && worker_sleeping_.load(std::memory_order_relaxed)) {
    wakeWorker();
  }
  return number;
}

// Note [Implied stream waits]
// ProcessGroupHCCL (as torch_npu's) orders a collective after the caller's
// stream with an event: record on the compute stream, then the
// communicator stream waits for it; work.wait() makes the compute stream
// wait for the collective's end in turn. Back-to-back collectives thus
// ping-pong between the two workers, each hand-off a thread wake-up, and
// on a 2-CPU machine that cost several times the collective itself.
// Yet when everything on the compute stream since its last real work is
// waits for the communicator stream's earlier records (and records), the
// record depends on nothing the communicator stream has not already queued
// ahead of the wait: its own order implies the wait, and
// aclrtStreamWaitEvent queues no blocking wait, as for a completed record.
// A stream keeps, producer side, the run of records and waits at the end of
// its queue (the first other item ends the run); the wait of stream S for a
// record that is item k of stream X is implied when k is in X's run, every
// wait of the run is for a record of S, every item before the run has
// completed, and X has no unreported failure (which S would inherit:
// Note [Device-work errors follow the dependencies]). Anything else (an
// item of another kind in between, a wait for a third stream, an IPC
// event, a racing producer) queues the wait as before.
// The implied wait still queues a marker (WaitWork::implied) that does not
// block: once S reaches it, the record has nothing left to wait for, and
// the marker completes it (taking its timestamp then) unless X already
// has. Without it, X's worker could complete the record after S's later
// work: a host that synchronized with S's later event would then find the
// record's event incomplete (aclrtEventQuery, aclrtEventElapsedTime's
// "not completed" error), which a device never shows. The record's error
// is then S's pending one: the run's waits are for S's records, which
// carry S's failures (Note [Device-work errors follow the dependencies]).
uint64_t Stream::enqueueMarker(const WorkItem& item, bool wait, const Stream* waits_on) {
  std::lock_guard lock(marker_mutex_);
  MarkerRun& run = marker_run_;
  if (queue_.published() != run.base + run.markers) {
    run = MarkerRun{queue_.published()}; // other work came since: a new run
  }
  if (wait) {
    if (waits_on == nullptr || (run.waits_on != nullptr && run.waits_on != waits_on)) {
      run.mixed = true;
    }
    run.waits_on = waits_on;
  }
  const uint64_t number = enqueue(item);
  if (number == run.base + run.markers + 1) {
    ++run.markers;
  } else {
    // Another producer's item came between: count this one as other work.
    run = MarkerRun{number};
  }
  return number;
}

bool Stream::impliedBy(uint64_t item, const Stream* on) {
  std::lock_guard lock(marker_mutex_);
  const MarkerRun& run = marker_run_;
  return item > run.base && item <= run.base + run.markers && !run.mixed &&
      (run.waits_on == nullptr || run.waits_on == on) && reached(run.base) &&
      pendingError() == nullptr;
}

void Stream::wakeWorker() {
  {
    std::lock_guard lock(sleep_mutex_);
    worker_sleeping_.store(false, std::memory_order_relaxed);
  }
  worker_cv_.notify_one();
}

// ---------------------------------------------------------------------------
// Synchronizers

bool Stream::yieldThroughBulk(uint64_t target) {
  const int64_t budget = kWaiterBulkSpin.count();
  const int64_t deadline = nowNs() + budget;
  while (!reached(target)) {
    // Note [Yield only through a copy that is due]
    // A large item we wait for is running and expected to end within the
    // budget, or the last one is next (the worker may still be waking up
    // for it). Not while other items before it are pending: one of them may
    // wait for another stream (DDP's gradient copies queue behind the wait
    // for the all-reduce, which waits for the peer rank). A yielding thread
    // stays runnable, so on a machine with more busy threads than CPUs it
    // still takes its share of a CPU from the threads it waits for (the
    // peer's compute and communicator workers), for up to the whole budget:
    // in benchmarks/ddp_scaling.py each rank's host thread used 3-6 ms of
    // CPU per step, 1 ms without it.
    const uint64_t bulk = last_bulk_item_.load(std::memory_order_acquire);
    const int64_t end = bulk_end_ns_.load(std::memory_order_acquire);
    const uint64_t done = completed_.load(std::memory_order_acquire);
    const int64_t now = nowNs();
    if (bulk > target || done >= bulk || (end == 0 && done + 1 < bulk) ||
        (end != 0 && end - now > budget) || now >= deadline) {
      return false;
    }
    sched_yield();
  }
  return true;
}

bool Stream::runQueuedHere(uint64_t target) {
  if (Stream::current() == this || abandon_.load(std::memory_order_relaxed)) {
    return false;
  }
  // Only while the worker is idle: a busy worker holds the consumer mutex.
  std::unique_lock consumer(consumer_mutex_, std::try_to_lock);
  if (!consumer.owns_lock()) {
    return false;
  }
  // Only the items this wait needs, and only up to the first one that must
  // run on the worker; counted exactly as the worker counts them.
  uint64_t done = completed_.load(std::memory_order_relaxed);
  const uint64_t end = std::min(target, queue_.published());
  const uint64_t first = done;
  if (done < end && isStealable(queue_.at(done))) {
    beginBusy();
    while (done < end && !abandon_.load(std::memory_order_relaxed)) {
      WorkItem& item = queue_.at(done);
      if (!isStealable(item)) {
        break;
      }
      execute(item);
      publishCompleted(++done);
    }
    endBusy();
  }
  consumer.unlock();
  // A worker that fell asleep meanwhile may have been woken for the items
  // run here and gone back to sleep; the rest is its to run.
  if (done != first && hasWork() && worker_sleeping_.load(std::memory_order_seq_cst)) {
    wakeWorker();
  }
  return done != first;
}

bool Stream::waitFor(uint64_t target) {
  const auto done = [&] { return reached(target); };
  if (reached(target)) {
    return true;
  }
  // Producers do not fence between publishing an item and looking whether
  // the worker sleeps (see enqueue); this fence pairs with the worker's
  // before it sleeps, so that a worker which missed our item is seen
  // asleep here and woken now rather than after its first sleep.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Waking a sleeping worker takes 100-250 us on a VM whose other virtual
  // CPU is idle, and the copy then runs on a CPU that was idle; the caller
  // would only wait meanwhile, so when the worker is idle it runs the
  // leading copies and awaited work itself (the usual copy-then-synchronize,
  // every blocking copy, data-dependent ops). The worker is woken for what
  // is left.
  while (runQueuedHere(target)) {
  }
  if (!reached(target) && worker_sleeping_.load(std::memory_order_relaxed) && hasWork()) {
    wakeWorker();
  }
  if (reached(target) || spinUntil(done, kWaiterSpin)) {
    return true;
  }
  if (yieldThroughBulk(target)) {
    return true;
  }
  // The items after a large copy are usually short: spin once more.
  if (spinUntil(done, kWaiterSpin)) {
    return true;
  }
  std::unique_lock lock(done_mutex_);
  while (true) {
    // Tell the worker the smallest count somebody sleeps for, then check:
    // the worker stores `completed_` before it reads `wake_target_`, we
    // store `wake_target_` before we read `completed_` (both seq_cst), so
    // one of us sees the other and no wake-up is lost.
    if (target < wake_target_.load(std::memory_order_seq_cst)) {
      wake_target_.store(target, std::memory_order_seq_cst);
    }
    if (completed_.load(std::memory_order_seq_cst) >= target) {
      return true;
    }
    if (processExiting()) {
      return false;
    }
    // The timeout only serves to notice process exit.
    done_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

void Stream::publishCompleted(uint64_t done) {
  // seq_cst store, then seq_cst load: pairs with waitFor, which stores
  // wake_target_ before it reads completed_ (no lost wake-up).
  completed_.store(done, std::memory_order_seq_cst);
  if (done >= wake_target_.load(std::memory_order_seq_cst)) {
    notifyWaiters();
  }
}

void Stream::notifyWaiters() {
  {
    std::lock_guard lock(done_mutex_);
    // Woken waiters that still wait register their target again.
    wake_target_.store(kNobodyWaits, std::memory_order_seq_cst);
  }
  done_cv_.notify_all();
}

std::shared_ptr<WorkError> Stream::pendingError() {
  if (!has_error_.load(std::memory_order_acquire)) {
    return nullptr;
  }
  std::lock_guard lock(error_mutex_);
  if (error_ && !error_->reported.load(std::memory_order_acquire)) {
    return error_;
  }
  return nullptr;
}

std::shared_ptr<WorkError> Stream::takeError() {
  if (!has_error_.load(std::memory_order_acquire)) {
    return nullptr;
  }
  std::lock_guard lock(error_mutex_);
  has_error_.store(false, std::memory_order_release);
  return std::move(error_);
}

void Stream::recordFailure(const npuSimWork& work, aclError code) {
  std::string detail =
      hasWorkErrorMessage() ? takeWorkErrorMessage() : strFormat("error code %d", code);
  std::lock_guard lock(error_mutex_);
  if (error_ && !error_->reported.load(std::memory_order_acquire)) {
    error_->more.fetch_add(1, std::memory_order_relaxed);
  } else {
    error_ = std::make_shared<WorkError>(strFormat(
        "device work '%s' failed: %s", work.name ? work.name : "(unnamed)", detail.c_str()));
  }
  has_error_.store(true, std::memory_order_release);
}

void Stream::inheritFailure(std::shared_ptr<WorkError> error) {
  if (error == nullptr || error->reported.load(std::memory_order_acquire)) {
    return;
  }
  std::lock_guard lock(error_mutex_);
  if (error_ && !error_->reported.load(std::memory_order_acquire)) {
    if (error_ != error) {
      error_->more.fetch_add(1, std::memory_order_relaxed);
    }
  } else {
    error_ = std::move(error);
  }
  has_error_.store(true, std::memory_order_release);
}

// ---------------------------------------------------------------------------
// Worker

namespace {

// Leaves the activity record of an item that ran from `start_ns` to now.
void recordActivity(const Stream& stream, uint32_t kind, const char* name, uint64_t work_id,
                    uint64_t correlation, int64_t start_ns, uint64_t bytes,
                    const activity::CollectiveDetail* collective = nullptr) {
  npuSimActivityRecord record{};
  record.peerRank = -1;
  if (collective != nullptr) {
    bytes = collective->bytes;
    record.rankCount = collective->rank_count;
    record.rank = collective->rank;
    record.peerRank = collective->peer;
    record.waitNs = collective->wait_ns;
    record.syncNs = collective->sync_ns;
  }
  record.name = name;
  record.kind = kind;
  record.deviceId = static_cast<int32_t>(stream.device());
  record.stream = const_cast<Stream&>(stream).handle();
  record.workId = work_id;
  record.correlationId = correlation;
  record.startNs = start_ns;
  record.endNs = nowNs();
  record.bytes = bytes;
  activity::record(record);
}

struct Executor {
  Stream& stream;

  void operator()(CopyWork& w) const {
    const int64_t start = activity::enabled() ? nowNs() : 0;
    stream.runBulk(w.count, [&] { copyBytes(w.dst, w.src, w.count); });
    if (start != 0) {
      recordActivity(stream, NPU_SIM_ACTIVITY_MEMCPY, "memcpy", 0, w.correlation, start, w.count);
    }
  }
  void operator()(MemsetWork& w) const {
    const int64_t start = activity::enabled() ? nowNs() : 0;
    stream.runBulk(w.count, [&] { std::memset(w.dst, w.value, w.count); });
    if (start != 0) {
      recordActivity(stream, NPU_SIM_ACTIVITY_MEMSET, "memset", 0, w.correlation, start, w.count);
    }
  }
  void operator()(RecordWork& w) const {
    w.event->completeRecord(w.generation, stream.pendingError());
    w.event->release();
  }
  void operator()(WaitWork& w) const {
    if (w.implied) {
      // Note [Implied stream waits]: completing the record here keeps the
      // event complete before anything after this wait, as on a device.
      w.event->completeRecord(w.generation, stream.pendingError());
    } else {
      w.event->wait(w.generation);
    }
    // Work ordered after failed work depends on it: see Note [Device-work
    // errors follow the dependencies] in event.h.
    stream.inheritFailure(w.event->errorOf(w.generation));
    w.event->release();
  }
  void operator()(UserWork& w) const;
};

} // namespace

template <typename Fn>
void Stream::runBulk(size_t count, Fn&& fn) {
  if (count < kBulkBytes) {
    fn();
    return;
  }
  const int64_t start = nowNs();
  const auto expected = static_cast<int64_t>(static_cast<double>(count) * bulk_ns_per_byte_);
  bulk_end_ns_.store(start + std::max<int64_t>(expected, 1), std::memory_order_release);
  fn();
  bulk_end_ns_.store(0, std::memory_order_release);
  // Follow the machine's speed (huge pages or not, other load) smoothly.
  const double measured = static_cast<double>(nowNs() - start) / static_cast<double>(count);
  bulk_ns_per_byte_ = 0.75 * bulk_ns_per_byte_ + 0.25 * measured;
}

void Stream::execute(WorkItem& item) {
  std::visit(Executor{*this}, item);
}

void Executor::operator()(UserWork& w) const {
  const npuSimWork& work = w.work;
  const bool traced = (work.flags & NPU_SIM_WORK_UNTRACED) == 0;
  const int64_t start = traced && activity::enabled() ? nowNs() : 0;
  setSignalWorkContext(work.name ? work.name : "(unnamed)");
  const aclError rc = work.run(work.ctx);
  setSignalWorkContext(nullptr);
  activity::CollectiveDetail collective;
  const bool is_collective = activity::takeRunningCollective(&collective);
  if (start != 0) {
    recordActivity(stream, NPU_SIM_ACTIVITY_KERNEL, work.name ? work.name : "(unnamed)", w.id,
                   w.correlation, start, 0, is_collective ? &collective : nullptr);
  }
  if (rc != ACL_SUCCESS) {
    stream.recordFailure(work, rc);
  } else if (hasWorkErrorMessage()) {
    takeWorkErrorMessage(); // set but not used: do not leak it to the next work
  }
  if (work.release != nullptr) {
    work.release(work.ctx);
  }
}

bool Stream::awaitWork() {
  const auto ready = [&] {
    return hasWork() || abandon_.load(std::memory_order_relaxed) || stop_.load(std::memory_order_relaxed);
  };
  while (true) {
    if (abandon_.load(std::memory_order_relaxed)) {
      return false; // process exit: the rest is abandoned
    }
    if (hasWork()) {
      return true;
    }
    if (stop_.load(std::memory_order_relaxed)) {
      return false; // destroy() drained the queue first
    }
    if (spinUntil(ready, kWorkerIdleSpin)) {
      continue;
    }
    // Sleep. Producers wake a worker they see asleep, without a fence (see
    // enqueue): one publishing just as the flag is set may not see it while
    // the check below does not see its item yet. The first sleep is
    // therefore short; once the flag has long been visible, no producer
    // misses it, and the worker sleeps until woken.
    worker_sleeping_.store(true, std::memory_order_seq_cst);
    std::unique_lock lock(sleep_mutex_);
    const auto woken = [&] { return !worker_sleeping_.load(std::memory_order_relaxed) || ready(); };
    if (!worker_cv_.wait_for(lock, kWorkerFirstSleep, woken)) {
      worker_cv_.wait(lock, woken);
    }
    worker_sleeping_.store(false, std::memory_order_relaxed);
  }
}

void Stream::workerMain() {
  tls_worker_stream = this;
  // Device work runs "on" its device: acl calls it makes with a null
  // stream mean this device's default stream.
  setCurrentDevice(static_cast<int32_t>(device_));
  char name[16];
  std::snprintf(name, sizeof(name), "npu%u-s%u", device_, serial_);
  pthread_setname_np(pthread_self(), name);
  lowerThreadPriority(priority_);

  // Runs on normal return and on forced unwinding (pthread_exit from code
  // the work called, e.g. a Python callback during interpreter shutdown).
  // Dying without having been asked to stop means the process is going
  // down: waiters must not wait for this worker.
  struct ExitFlag {
    Stream& stream;
    bool normal = false;
    ~ExitFlag() {
      if (!normal) {
        markProcessExiting();
      }
      stream.worker_exited_.store(true, std::memory_order_release);
    }
  } exit_flag{*this};

  while (awaitWork()) {
    std::unique_lock consumer(consumer_mutex_, std::try_to_lock);
    if (!consumer.owns_lock()) {
      // A synchronizer is running leading copies: usually short. Sleeping
      // in the mutex would cost a wake-up (see kWaiterBulkSpin).
      if (!spinUntil([&] { return consumer.try_lock(); }, kWorkerIdleSpin)) {
        consumer.lock();
      }
    }
    // Synchronizers may have run items since the worker last did. The
    // worker keeps the consumer mutex while items keep coming.
    uint64_t done = completed_.load(std::memory_order_relaxed);
    beginBusy();
    for (uint64_t end; done < (end = queue_.published());) {
      while (done < end && !abandon_.load(std::memory_order_relaxed)) {
        execute(queue_.at(done));
        publishCompleted(++done);
      }
      if (abandon_.load(std::memory_order_relaxed)) {
        break;
      }
    }
    endBusy();
  }
  tls_worker_stream = nullptr;
  exit_flag.normal = true;
}

// ---------------------------------------------------------------------------
// Teardown

void Stream::destroy() {
  magic_.store(0, std::memory_order_relaxed);
  waitFor(enqueued());
  stop_.store(true, std::memory_order_relaxed);
  wakeWorker();
  if (worker_.joinable()) {
    worker_.join();
  }
}

void Stream::requestExit() {
  abandon_.store(true, std::memory_order_relaxed);
  stop_.store(true, std::memory_order_relaxed);
  wakeWorker();
}

void Stream::finishExit(int64_t deadline_ns) {
  if (!worker_.joinable()) {
    return;
  }
  if (worker_.get_id() == std::this_thread::get_id()) {
    worker_.detach(); // exit() called from device work
    return;
  }
  while (!workerExited() && nowNs() < deadline_ns) {
    usleep(1000);
  }
  if (workerExited()) {
    worker_.join();
  } else {
    // Still inside long device work: leave it; the process ends anyway and
    // the simulator's state is never freed, so it stays valid meanwhile.
    worker_.detach();
  }
}

} // namespace npu_sim
