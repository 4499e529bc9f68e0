#include "shared_segment.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <thread>

namespace npu_sim {

// Note [Shared segments]
// A communicator's shared segment carries every collective's data, so only
// the job may ever map it, and a job killed at any moment, the connect
// phase included, must leave nothing behind. A named POSIX segment cannot
// promise the second: its name outlives every process until someone
// removes it, and with every rank killed while joining, nobody does. So the
// segment never has a name:
//   * rank 0 makes it an unnamed file in /dev/shm's tmpfs (O_TMPFILE, mode
//     0600; a memfd where /dev/shm lacks O_TMPFILE), so /dev/shm's size
//     limit still applies to it, as it does to a real HCCL's shared memory;
//   * the ranks meet at a Unix socket in the abstract namespace, named
//     after the communicator ("@npu-sim-hccl-..."). The kernel removes such
//     a name when the last descriptor of its socket closes, which includes
//     the death of its process, by SIGKILL or otherwise;
//   * rank 0 binds that name before it makes the segment: a name another
//     process holds (a second job from the same rank table, or someone who
//     claimed it first) fails HcclCommInitRootInfo/ClusterInfo instead of
//     being shared. A thread of rank 0 then hands the segment's descriptor
//     (SCM_RIGHTS) to every process that connects, after checking through
//     SO_PEERCRED that it runs as the same user; the joining rank checks
//     the same of the socket's owner before it takes the descriptor, so a
//     name held by another user is refused on both sides;
//   * once every rank has joined (the connect meeting), rank 0 closes the
//     socket. From then on the segment is reachable only through the ranks'
//     mappings and goes away with the last of them.
// At no moment does the job own anything that outlives its processes. The
// same root info or rank table works again as soon as the earlier job's
// processes are gone.

namespace {

// sockaddr_un of the abstract name "\0<name without its leading '/'>".
socklen_t abstractAddress(const std::string& name, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  const std::string tail = name.empty() || name[0] != '/' ? name : name.substr(1);
  const size_t length = std::min(tail.size(), sizeof addr->sun_path - 1);
  std::memcpy(addr->sun_path + 1, tail.data(), length);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
}

// A one-byte message with room for one descriptor (SCM_RIGHTS): what rank 0
// sends each joining rank, and what a joining rank receives.
struct DescriptorMessage {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};

  DescriptorMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  DescriptorMessage(const DescriptorMessage&) = delete; // msg points into it
  DescriptorMessage& operator=(const DescriptorMessage&) = delete;
};

bool sameUser(int socket_fd, uid_t* peer_uid) {
  ucred cred{};
  socklen_t length = sizeof cred;
  if (getsockopt(socket_fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    return false;
  }
  *peer_uid = cred.uid;
  return cred.uid == geteuid();
}

// An unnamed 0600 file in /dev/shm, or a memfd where that is not possible.
int unnamedSegment(const std::string& name) {
  const int fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) {
    return fd;
  }
  return memfd_create(name.c_str() + (name[0] == '/' ? 1 : 0), MFD_CLOEXEC);
}

} // namespace

HcclResult SegmentHost::create(const std::string& name, std::unique_ptr<SegmentHost>* out,
                               std::string* why) {
  const int listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd < 0) {
    *why = "socket(AF_UNIX) failed: " + std::string(std::strerror(errno));
    return HCCL_E_SYSCALL;
  }
  sockaddr_un addr;
  const socklen_t length = abstractAddress(name, &addr);
  if (bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), length) != 0) {
    const int error = errno;
    close(listen_fd);
    *why = error == EADDRINUSE
        ? "the communicator's name " + name + " is already in use on this machine: another "
          "process holds it (a job running from the same root info or the same rank table, "
          "or a process that claimed the name first), and its segment would carry this "
          "job's data, so it is not shared. Make a new root info (HcclGetRootInfo) for this "
          "job, or wait until the other job has ended"
        : "bind of the communicator's socket @" + name.substr(1) + " failed: " +
          std::strerror(error);
    return error == EADDRINUSE ? HCCL_E_PARA : HCCL_E_SYSCALL;
  }
  const int segment_fd = unnamedSegment(name);
  if (segment_fd < 0) {
    const int error = errno;
    close(listen_fd);
    *why = "could not make the communicator's shared segment in /dev/shm: " +
        std::string(std::strerror(error));
    return HCCL_E_SYSCALL;
  }
  out->reset(new SegmentHost(listen_fd, segment_fd));
  return HCCL_SUCCESS;
}

SegmentHost::~SegmentHost() {
  stop();
  close(segment_fd_);
}

void SegmentHost::serve() {
  if (listen(listen_fd_, SOMAXCONN) != 0) {
    return; // the joining ranks time out, naming rank 0
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  server_ = std::thread([this] { serveLoop(); });
}

void SegmentHost::stop() {
  if (server_.joinable()) {
    const uint64_t one = 1;
    stopping_.store(true);
    (void)!write(wake_fd_, &one, sizeof one);
    server_.join();
  }
  if (wake_fd_ >= 0) {
    close(wake_fd_);
    wake_fd_ = -1;
  }
  if (listen_fd_ >= 0) {
    close(listen_fd_); // releases the name
    listen_fd_ = -1;
  }
}

void SegmentHost::serveLoop() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (!stopping_.load()) {
    // The wake-up descriptor ends the wait at once when stop() is called;
    // the timeout only guards against a failed eventfd.
    if (poll(fds, wake_fd_ >= 0 ? 2 : 1, 100) <= 0 || !(fds[0].revents & POLLIN)) {
      continue;
    }
    const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      continue;
    }
    uid_t peer = 0;
    if (sameUser(conn, &peer)) {
      DescriptorMessage message;
      message.byte = 'S';
      cmsghdr* cmsg = CMSG_FIRSTHDR(&message.msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cmsg), &segment_fd_, sizeof(int));
      // A peer that went away meanwhile is no concern of the others.
      (void)sendmsg(conn, &message.msg, MSG_NOSIGNAL);
    }
    close(conn); // another user's process gets nothing
  }
}

JoinOutcome joinSegment(const std::string& name, std::chrono::steady_clock::time_point deadline,
                        int* fd, std::string* why) {
  sockaddr_un addr;
  const socklen_t length = abstractAddress(name, &addr);
  for (;;) {
    const int conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (conn < 0) {
      *why = "socket(AF_UNIX) failed: " + std::string(std::strerror(errno));
      return JoinOutcome::kFailed;
    }
    if (connect(conn, reinterpret_cast<sockaddr*>(&addr), length) == 0) {
      uid_t owner = 0;
      if (!sameUser(conn, &owner)) {
        close(conn);
        *why = "the communicator's name " + name + " is held by a process of user " +
            std::to_string(owner) + ", not of this user (" + std::to_string(geteuid()) +
            "): another process claimed it, so its segment is not used. Make a new root info "
            "(HcclGetRootInfo) for this job";
        return JoinOutcome::kFailed;
      }
      // Rank 0 answers at once; the deadline bounds a host that stalls.
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
          deadline - std::chrono::steady_clock::now());
      const auto wait = std::max(left, std::chrono::microseconds(1000));
      timeval tv{static_cast<time_t>(wait.count() / 1000000),
                 static_cast<suseconds_t>(wait.count() % 1000000)};
      setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      DescriptorMessage message;
      const ssize_t got = recvmsg(conn, &message.msg, MSG_CMSG_CLOEXEC);
      close(conn);
      const cmsghdr* cmsg = got == 1 ? CMSG_FIRSTHDR(&message.msg) : nullptr;
      if (cmsg != nullptr && cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) {
        std::memcpy(fd, CMSG_DATA(cmsg), sizeof(int));
        return JoinOutcome::kJoined;
      }
      // Rank 0 stopped serving between accept and send (it failed): ask
      // again until the deadline, as before it started.
    } else {
      const int error = errno;
      close(conn);
      // ECONNREFUSED: nobody holds the name yet, or rank 0 has bound it but
      // does not listen yet.
      if (error != ECONNREFUSED && error != ENOENT && error != EAGAIN && error != EINTR) {
        *why = "connect to the communicator's socket @" + name.substr(1) + " failed: " +
            std::strerror(error);
        return JoinOutcome::kFailed;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return JoinOutcome::kTimedOut;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

} // namespace npu_sim
