// The progress of an event shared between processes (aclrtIpcGetEventHandle
// / aclrtIpcOpenEventHandle).
//
// Note [IPC events]
// An event created with ACL_EVENT_IPC publishes its progress, once
// aclrtIpcGetEventHandle exported it, in a one-page memfd: the latest
// generation recorded and the first generation not yet complete (latest + 1
// when none is pending), updated under the event's lock at every record and
// completion, with a counter other processes sleep on (a futex on shared
// memory). The handle names the exporter's pid, the memfd's descriptor and
// a nonce, as IPC memory keys do (Note [IPC memory], ipc_memory.h: same
// user only, through /proc/<pid>/fd). The opened event in another process
// reads that page: aclrtStreamWaitEvent waits for the generation that was
// the latest at the call, aclrtSynchronizeEvent and aclrtQueryEventStatus
// likewise; a generation counts as complete once every generation up to it
// is (records completing out of order across the exporter's streams delay
// a waiter, never release it early). The exporter's device-work failures do
// not travel (each process reports its own), an opened event cannot be
// recorded, and it carries no timestamps. The stores are release and the
// loads acquire, so work ordered after a wait sees what the exporter's
// work before the record wrote to shared device memory.
// A generation still pending when the exporter destroys the event or exits
// never completes: waiting for it lasts until the waiter's process exits
// (as an IPC event whose owner is gone is undefined on CANN and CUDA).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "acl_types.h"

namespace npu_sim {

class IpcEventState {
 public:
  // For the exporter: a new shared page, and the handle text naming it.
  static aclError create(IpcEventState** out, std::string* handle);
  // For an importer: maps the page the handle names.
  static aclError open(const char* handle, IpcEventState** out);
  ~IpcEventState();

  // Exporter, under the event's lock.
  void publish(uint64_t latest, uint64_t first_pending);

  uint64_t latest() const;
  bool isComplete(uint64_t generation) const;
  // Blocks until `generation` is complete; false if the process started
  // exiting meanwhile.
  bool wait(uint64_t generation) const;

 private:
  struct Page;
  IpcEventState(Page* page, int fd) : page_(page), fd_(fd) {}
  Page* page_;
  int fd_;
};

} // namespace npu_sim
