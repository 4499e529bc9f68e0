// How the ranks of a communicator of the simulated HCCL come to share one
// memory segment without ever giving it a name in the file system (Note
// [Shared segments], shared_segment.cpp).
//
// Rank 0 makes the segment (SegmentHost) and hands its file descriptor to
// every other rank that asks (joinSegment) through a Unix socket in the
// abstract namespace, named after the communicator.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "hccl_types.h"

namespace npu_sim {

class SegmentHost {
 public:
  // Claims `name` on this machine (a name another process holds fails with
  // HCCL_E_PARA) and makes an empty unnamed segment in /dev/shm, which the
  // caller sizes. Does not hand it out yet: see serve().
  static HcclResult create(const std::string& name, std::unique_ptr<SegmentHost>* out,
                           std::string* why);
  ~SegmentHost(); // stops serving; closes this process's descriptors
  SegmentHost(const SegmentHost&) = delete;
  SegmentHost& operator=(const SegmentHost&) = delete;

  int fd() const { return segment_fd_; }
  // From now until stop() (or destruction), a thread hands the segment to
  // every process of this user that asks for it by name.
  void serve();
  // Stops handing it out and releases the name.
  void stop();

 private:
  SegmentHost(int listen_fd, int segment_fd) : listen_fd_(listen_fd), segment_fd_(segment_fd) {}
  void serveLoop();

  int listen_fd_;
  int segment_fd_;
  int wake_fd_ = -1; // ends the server thread's wait (an eventfd)
  std::atomic<bool> stopping_{false};
  std::thread server_;
};

// What joinSegment got: the segment's descriptor (owned by the caller), or
// why not.
enum class JoinOutcome { kJoined, kTimedOut, kFailed };

// Asks the SegmentHost of `name` for its segment until `deadline` (rank 0
// may not have made it yet). kFailed, with `why`: the name is held by
// another user, or a system call failed.
JoinOutcome joinSegment(const std::string& name, std::chrono::steady_clock::time_point deadline,
                        int* fd, std::string* why);

} // namespace npu_sim
