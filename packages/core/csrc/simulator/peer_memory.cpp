#include "peer_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

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

namespace {

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

// A duplicate of descriptor `fd` of process `pid`: pidfd_getfd (Linux 5.6)
// or, on older kernels, reopening it through /proc (which gives a new open
// file of the same memfd, as good for mapping). -1 with errno set.
int takeDescriptor(pid_t pid, int fd) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    const int got = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
    const int error = errno;
    close(pidfd);
    if (got >= 0) {
      fcntl(got, F_SETFD, FD_CLOEXEC);
      return got;
    }
    if (error != ENOSYS) {
      errno = error;
      return -1;
    }
  }
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

} // namespace

PeerMapping::~PeerMapping() {
  reset();
}

PeerMapping::PeerMapping(PeerMapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PeerMapping& PeerMapping::operator=(PeerMapping&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void PeerMapping::reset() {
  if (data_ != nullptr) {
    munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }
}

bool PeerMapping::open(pid_t pid, int fd, uint64_t inode, uint64_t bytes, std::string* why) {
  reset();
  const int local = takeDescriptor(pid, fd);
  if (local < 0) {
    *why = std::string("taking the peer's device memory descriptor failed: ") +
        std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (fstat(local, &st) != 0 || static_cast<uint64_t>(st.st_ino) != inode ||
      static_cast<uint64_t>(st.st_size) != bytes) {
    close(local);
    *why = "the peer's descriptor is not its device memory";
    return false;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, local, 0);
  const int error = errno;
  close(local); // the mapping holds the file
  if (p == MAP_FAILED) {
    *why = std::string("mapping the peer's device memory failed: ") + std::strerror(error);
    return false;
  }
  // A fork()ed child cannot use the simulator (runtime.cpp): it need not
  // inherit the view either.
  madvise(p, bytes, MADV_DONTFORK);
  data_ = static_cast<char*>(p);
  size_ = bytes;
  return true;
}

} // namespace npu_sim
