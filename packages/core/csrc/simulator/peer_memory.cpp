#include "peer_memory.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace npu_sim {

PeerReadResult readPeerMemory(pid_t pid, uintptr_t remote, void* local, size_t bytes,
                              std::string* why) {
  auto* out = static_cast<char*>(local);
  while (bytes > 0) {
    iovec to{out, bytes};
    iovec from{reinterpret_cast<void*>(remote), bytes};
    const ssize_t copied = process_vm_readv(pid, &to, 1, &from, 1, 0);
    if (copied > 0) {
      // A partial copy stops at a page the kernel could not read; the next
      // call reports why, or goes on if the peer mapped it meanwhile.
      out += copied;
      remote += static_cast<size_t>(copied);
      bytes -= static_cast<size_t>(copied);
      continue;
    }
    const int error = copied == 0 ? EFAULT : errno;
    if (error == EINTR) {
      continue;
    }
    *why = std::strerror(error);
    switch (error) {
      case EPERM:
      case EACCES:
      case ENOSYS:
        return PeerReadResult::kRefused;
      case ESRCH:
        return PeerReadResult::kGone;
      default:
        return PeerReadResult::kFault;
    }
  }
  return PeerReadResult::kDone;
}

} // namespace npu_sim
