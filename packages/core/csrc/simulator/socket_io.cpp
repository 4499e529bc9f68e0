#include "socket_io.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "runtime.h"

namespace npu_sim {

void copyString(char* out, size_t size, const std::string& in) {
  std::snprintf(out, size, "%s", in.c_str());
}

std::string fixedString(const char* in, size_t size) {
  return std::string(in, strnlen(in, size));
}

std::string addressText(const SocketAddress& a) {
  return fixedString(a.ip, sizeof a.ip) + ":" + std::to_string(a.port);
}

SocketClock::time_point deadlineAfter(double seconds) {
  if (std::isinf(seconds)) {
    return SocketClock::time_point::max();
  }
  return SocketClock::now() + std::chrono::duration_cast<SocketClock::duration>(
                            std::chrono::duration<double>(seconds));
}

int pollMillis(SocketClock::time_point deadline) {
  if (deadline == SocketClock::time_point::max()) {
    return 100;
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SocketClock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left + 1, 0, 100));
}

std::string interfaceAddress() {
  const char* value = std::getenv("HCCL_IF_IP");
  if (value == nullptr || *value == '\0') {
    return {};
  }
  in_addr parsed{};
  if (inet_pton(AF_INET, value, &parsed) != 1) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      std::fprintf(stderr, "npu simulator: HCCL_IF_IP=%s is not an IPv4 address; ignoring it\n",
                   value);
    });
    return {};
  }
  return value;
}

std::string hostAddress() {
  std::string found = "127.0.0.1";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return found;
  }
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET ||
        (i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) {
      continue;
    }
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    found = text;
    break;
  }
  freeifaddrs(list);
  return found;
}

uint16_t basePort() {
  constexpr uint16_t kDefault = 60000;
  const char* value = std::getenv("HCCL_IF_BASE_PORT");
  if (value == nullptr || *value == '\0') {
    return kDefault;
  }
  char* end = nullptr;
  const unsigned long port = std::strtoul(value, &end, 10);
  if (end == value || *end != '\0' || port == 0 || port > 65535) {
    std::fprintf(stderr, "npu simulator: HCCL_IF_BASE_PORT=%s is not a port (1-65535); using %u\n",
                 value, static_cast<unsigned>(kDefault));
    return kDefault;
  }
  return static_cast<uint16_t>(port);
}

int listenSocket(int backlog, uint16_t* port, std::string* why) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = "socket() failed: " + std::string(std::strerror(errno));
    return -1;
  }
  // A fixed port may still have connections of an earlier job in TIME_WAIT.
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(*port);
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (const std::string ip = interfaceAddress(); !ip.empty()) {
    inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  }
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *why = "cannot listen for TCP connections on port " + std::to_string(*port) +
        " (0: any; HCCL_IF_IP=" + interfaceAddress() + "): " + std::strerror(errno);
    close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

void setNoDelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void setNonBlocking(int fd, bool on) {
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

bool waitFor(int fd, short events, SocketClock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, pollMillis(deadline));
    if (n > 0) {
      return true;
    }
    if ((n < 0 && errno != EINTR) || SocketClock::now() >= deadline || processExiting()) {
      return false;
    }
  }
}

int sendAll(int fd, const void* data, size_t bytes, SocketClock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!waitFor(fd, POLLOUT, deadline)) {
        return ETIMEDOUT;
      }
    } else {
      return n < 0 ? errno : ECONNRESET;
    }
  }
  return 0;
}

int receiveAll(int fd, void* data, size_t bytes, SocketClock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = recv(fd, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!waitFor(fd, POLLIN, deadline)) {
        return ETIMEDOUT;
      }
    } else {
      return n < 0 ? errno : ECONNRESET;
    }
  }
  return 0;
}

int connectTo(const SocketAddress& to, SocketClock::time_point deadline, int* error) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(to.port);
  if (inet_pton(AF_INET, fixedString(to.ip, sizeof to.ip).c_str(), &addr.sin_addr) != 1) {
    *error = EINVAL;
    return -1;
  }
  for (;;) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      *error = errno;
      return -1;
    }
    int result = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 ? 0 : errno;
    if (result == EINPROGRESS) {
      result = waitFor(fd, POLLOUT, deadline) ? 0 : ETIMEDOUT;
      if (result == 0) {
        socklen_t len = sizeof result;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &result, &len);
      }
    }
    if (result == 0) {
      return fd;
    }
    close(fd);
    *error = result;
    if (result == ETIMEDOUT || SocketClock::now() >= deadline || processExiting()) {
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50)); // not listening yet
  }
}

} // namespace npu_sim
