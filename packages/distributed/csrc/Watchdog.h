// The watchdog of a ProcessGroupHCCL and the heartbeat monitor that
// watches the watchdog (Note [Watchdog and heartbeat monitor]).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <c10/core/Device.h>

#include "npu/HcclInterface.h"

namespace c10d_npu {

// Note [Watchdog and heartbeat monitor]
// Each ProcessGroupHCCL has a watchdog thread, as ProcessGroupNCCL does. A
// collective cannot hang it, and it enforces no timeout: HCCL itself bounds
// every collective and fails it, naming the ranks that did not arrive
// (Note [HCCL timeouts]), and the error surfaces at the next synchronizing
// call. The watchdog asks each communicator of the group for its
// asynchronous error (HcclGetCommAsyncError) every 100 ms and reports, once
// per communicator, on stderr when it has failed, so that a rank whose host
// is busy elsewhere still tells why its collectives stopped;
// HCCL_ASYNC_ERROR_HANDLING=0 turns these reports off (torch_npu's switch of
// its asynchronous error handling, on by default: torch_npu ends the process
// only for a network completion error (ERROR CQE), which the simulator has
// no counterpart of, and otherwise reports). It does not
// query events: a completed query orders the host after the work for the
// simulator's race detector, which would hide the user's races. Every pass
// is a heartbeat.
//
// What can hang is the watchdog itself, inside an HCCL or runtime call
// that never returns. TORCH_HCCL_ENABLE_MONITORING (torch_npu's name for
// PyTorch's TORCH_NCCL_ENABLE_MONITORING; on unless set to 0) starts a
// second thread, the heartbeat monitor: when the watchdog has not beaten
// for TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC seconds (default 480, PyTorch's),
// it prints what it knows (the rank, how long, the communicators) to
// stderr and aborts the process (SIGABRT), so that a job whose host side
// is stuck ends and its launcher can restart it instead of holding its
// devices for ever. The monitor checks ten times per timeout (at most
// every second), so it ends the process within about a tenth of the
// timeout after it passed. It never waits for the watchdog's lock: a
// watchdog stuck while holding it would stall the monitor too. Both
// threads stop when the group is destroyed, or at the process's exit for a
// group Python never destroys (before HCCL's static objects go).
//
// TORCH_NPU_TEST_STALL_WATCHDOG=1 is for tests only: the watchdog stops
// beating after its first pass with a communicator to watch (it waits, as a
// hung call would, until the group is destroyed).
class Watchdog {
 public:
  // Starts the watchdog of rank `rank`'s group, and the monitor unless
  // TORCH_HCCL_ENABLE_MONITORING is 0. A bad value of any of its variables
  // raises, naming the accepted ones.
  explicit Watchdog(int rank);
  ~Watchdog(); // stops both threads
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Watches `comm`, the communicator of `device` (until the group is
  // destroyed: the watchdog stops before the communicators are).
  void watch(HcclComm comm, c10::Device device);
  // Stops watching `comm`, before the group destroys it ahead of its own
  // end (Note [Rebuilding a group's communicators], ProcessGroupHCCL.h).
  // The watchdog queries under the same lock: once this returns, it no
  // longer touches `comm`.
  void unwatch(HcclComm comm);
  // Stops both threads (at the latest when the process exits, before
  // HCCL's static objects go). Called once.
  void stop();

 private:
  struct Watched {
    HcclComm comm;
    c10::Device device;
    bool reported = false; // its error was reported
  };

  void run();
  void monitor(std::chrono::milliseconds timeout);
  // Ends the process: the watchdog has not beaten for `stuck`.
  [[noreturn]] void terminate(std::chrono::milliseconds stuck,
                              std::chrono::milliseconds timeout);

  const int rank_;
  const bool reports_; // HCCL_ASYNC_ERROR_HANDLING is not 0
  std::atomic<uint64_t> heartbeat_{0};
  std::mutex mutex_; // guards watched_ and stopping_
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<Watched> watched_;
  std::mutex monitor_mutex_; // guards monitor_stopping_
  std::condition_variable monitor_wake_;
  bool monitor_stopping_ = false;
  std::thread watchdog_;
  std::thread monitor_;
};

} // namespace c10d_npu
