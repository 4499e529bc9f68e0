#include "socket_transport.h"

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
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "collective_reduce.h"
#include "runtime.h"

namespace npu_sim {

// Note [Socket transport]
// The shared-memory transport (collective_comm.cpp) needs every rank on one
// machine (Note [One machine]); a job whose ranks run on several machines
// (or claim to, with NPU_SIM_HOST_ID) meets over TCP, as real HCCL does
// between servers:
//
// * Rendezvous. HcclGetRootInfo starts this process's rendezvous server (one
//   per process, listening on HCCL_IF_IP or every address, on a port the
//   kernel picks) and writes its address beside the machine's identity into
//   the root info, which the job hands out as usual (torch.distributed:
//   through the c10d store). A rank on another machine than the root info's
//   registers at once: it sends the server (communicator name, nRanks, its
//   rank, machine identity, the address it listens at for its peers). Ranks
//   on the root info's machine first join the shared segment as before;
//   rank 0 sees that a rank of another machine registered and tells the
//   others through the segment's header, and they all register too. So a
//   job on one machine never touches TCP and runs exactly as before. Rank 0
//   learns it from the server in its own process, so rank 0 must run in the
//   process that made the root info (torch.distributed's rank 0 does);
//   otherwise a job spanning machines times out joining. When all nRanks
//   registered, the server answers each with the table of all ranks.
// * Mesh. Each rank connects to every lower rank's listener and accepts
//   every higher one: a full mesh of TCP connections (TCP_NODELAY), each
//   first carrying its rank. The address a rank advertises is HCCL_IF_IP,
//   or the local address its connection to the server used (so peers reach
//   it on the network they reach the root on). HCCL_CONNECT_TIMEOUT bounds
//   rendezvous and mesh together.
// * Collectives. Every message is a frame (kind, code, payload bytes,
//   descriptor) and its payload. A collective first sends its descriptor
//   (with an all-to-all's counts) to every peer and reads every peer's: each
//   rank then holds all descriptors and fails, with the shared-memory path's
//   message, unless all agree (Note [Collective descriptors]). Then data:
//   the simple algorithms a simulator wants, each rank sending every peer
//   what that one needs at once (all-reduce and reduce-scatter send inputs;
//   each receiver combines them in rank order, so results are bit-identical
//   to the shared-memory transport's). Sends and receives are non-blocking
//   and progress together under poll(), so two ranks sending each other
//   more than the socket buffers hold do not deadlock.
// * Point-to-point. A send is a message frame (type, bytes) and its data;
//   the receiver checks both against its receive. Messages between a pair
//   stay in order (one connection); a batch progresses all at once. Unlike
//   the shared-memory path, a send completes once the kernel holds its
//   data, not when it is received: a receive that does not match fails the
//   receiver, and the sender at its next call (the receiver's failure frame).
// * Failures. A rank whose collective fails sends every peer a failure frame
//   (with its message) and closes its connections; a peer reading it fails
//   naming the rank and quoting its message, a
//   peer reading end-of-file or a reset (a killed rank: the kernel closes
//   its sockets) fails at once naming the rank that left. Waits are bounded
//   by the exec timeout (config or HCCL_EXEC_TIMEOUT) as in the
//   shared-memory path. Not measured: the wait times of Note [Collective
//   wait times] (zero for this transport).

namespace {

using Clock = std::chrono::steady_clock;

constexpr char kHelloMagic[16] = "npu-sim-hccl/tc";
constexpr size_t kNameBytes = 96;
constexpr size_t kMachineBytes = 160;
// The most of a failing rank's message its peers are sent.
constexpr size_t kFailureBytes = 2048;

struct Hello {
  char magic[16];
  char name[kNameBytes];
  char machine[kMachineBytes];
  uint32_t size;
  uint32_t rank;
  SocketAddress listen;
};
struct Reply {
  uint32_t status; // an HcclResult
  uint32_t size;
  char error[512];
};
struct TableEntry {
  char machine[kMachineBytes];
  SocketAddress listen;
};
// The first bytes on a mesh connection: who connected.
struct MeshHello {
  char magic[16];
  uint32_t rank;
  uint32_t size;
};

enum FrameKind : uint32_t {
  kCollective = 0xC011EC71,
  kData = 0xDA7ADA7A,
  kMessage = 0x3E55A6E0,
  kFailed = 0xFA11ED00,
};
struct Frame {
  uint32_t kind;
  uint32_t code;  // kMessage: the HcclDataType; kFailed: the HcclResult
  uint64_t bytes; // of the payload that follows
  CollectiveDescriptor what; // kCollective
};
static_assert(std::is_trivially_copyable_v<Frame>);

void copyString(char* out, size_t size, const std::string& in) {
  std::snprintf(out, size, "%s", in.c_str());
}

std::string fixedString(const char* in, size_t size) {
  return std::string(in, strnlen(in, size));
}

std::string formatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

std::string addressText(const SocketAddress& a) {
  return fixedString(a.ip, sizeof a.ip) + ":" + std::to_string(a.port);
}

Clock::time_point deadlineAfter(double seconds) {
  if (std::isinf(seconds)) {
    return Clock::time_point::max();
  }
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

// Milliseconds to wait in poll() before looking again (at most 100).
int pollMillis(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) {
    return 100;
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left + 1, 0, 100));
}

// HCCL_IF_IP, as real HCCL reads it: the address to listen and be reached
// at; empty when unset (or not an IPv4 address, which is said once).
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

// An IPv4 address other machines may reach this one at: the first
// non-loopback interface that is up, else the loopback address.
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

// A listening TCP socket on HCCL_IF_IP (else every address), on a port the
// kernel picks; -1 with `why` on failure.
int listenSocket(int backlog, uint16_t* port, std::string* why) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = "socket() failed: " + std::string(std::strerror(errno));
    return -1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (const std::string ip = interfaceAddress(); !ip.empty()) {
    inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  }
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *why = "cannot listen for TCP connections (HCCL_IF_IP=" + interfaceAddress() +
        "): " + std::strerror(errno);
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

// Waits until `fd` is ready for `events` or `deadline`; false on timeout.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, pollMillis(deadline));
    if (n > 0) {
      return true;
    }
    if ((n < 0 && errno != EINTR) || Clock::now() >= deadline || processExiting()) {
      return false;
    }
  }
}

// Writes or reads all `bytes` on a blocking-mode-agnostic socket before
// `deadline`. Returns 0, or an errno (ETIMEDOUT; ECONNRESET for an early
// end of file).
int sendAll(int fd, const void* data, size_t bytes, Clock::time_point deadline) {
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

int receiveAll(int fd, void* data, size_t bytes, Clock::time_point deadline) {
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

// Connects to `to` before `deadline`, retrying while nobody listens yet.
// Returns the socket, or -1 with the last errno in `error`.
int connectTo(const SocketAddress& to, Clock::time_point deadline, int* error) {
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
    if (result == ETIMEDOUT || Clock::now() >= deadline || processExiting()) {
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50)); // not listening yet
  }
}

// The process's rendezvous server (Note [Socket transport]). Never
// destroyed: its thread waits in poll() until the process exits.
class RendezvousServer {
 public:
  // This process's server; started unless `start` is false (then null
  // when there is none).
  static RendezvousServer* get(bool start, std::string* why) {
    static std::mutex mutex;
    static RendezvousServer* server = nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    if (server == nullptr && start) {
      uint16_t port = 0;
      const int fd = listenSocket(128, &port, why);
      if (fd < 0) {
        return nullptr;
      }
      server = new RendezvousServer(fd);
      const std::string ip = interfaceAddress();
      copyString(server->address_.ip, sizeof server->address_.ip, ip.empty() ? hostAddress() : ip);
      server->address_.port = port;
      std::thread([s = server] { s->loop(); }).detach();
    }
    return server;
  }

  const SocketAddress& address() const { return address_; }

  bool heardFromAnotherMachine(const std::string& name, const std::string& machine) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = machines_.find(name);
    return it != machines_.end() &&
        std::any_of(it->second.begin(), it->second.end(),
                    [&](const std::string& m) { return m != machine; });
  }

 private:
  struct Pending {
    int fd;
    Hello hello;
  };

  explicit RendezvousServer(int fd) : listen_fd_(fd) {}

  static void answer(int fd, const Reply& reply, const std::vector<TableEntry>& table) {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    if (sendAll(fd, &reply, sizeof reply, deadline) == 0 && !table.empty()) {
      sendAll(fd, table.data(), table.size() * sizeof(TableEntry), deadline);
    }
    close(fd);
  }

  static void refuse(int fd, HcclResult code, const std::string& error) {
    Reply reply{};
    reply.status = code;
    copyString(reply.error, sizeof reply.error, error);
    answer(fd, reply, {});
  }

  void admit(int fd) {
    Hello hello{};
    if (receiveAll(fd, &hello, sizeof hello, Clock::now() + std::chrono::seconds(5)) != 0 ||
        std::memcmp(hello.magic, kHelloMagic, sizeof kHelloMagic) != 0) {
      close(fd); // not a rank of this simulator
      return;
    }
    const std::string name = fixedString(hello.name, sizeof hello.name);
    std::vector<Pending>& ranks = pending_[name];
    if (!ranks.empty() && ranks.front().hello.size != hello.size) {
      refuse(fd, HCCL_E_PARA,
             "this rank was given nRanks " + std::to_string(hello.size) + ", rank " +
                 std::to_string(ranks.front().hello.rank) + " " +
                 std::to_string(ranks.front().hello.size) +
                 "; every rank must pass the same nRanks");
      return;
    }
    for (const Pending& p : ranks) {
      if (p.hello.rank == hello.rank) {
        refuse(fd, HCCL_E_PARA,
               "rank " + std::to_string(hello.rank) +
                   " has already joined this communicator (from " +
                   fixedString(p.hello.machine, kMachineBytes) +
                   "); every process must pass a different rank");
        return;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      machines_[name].insert(fixedString(hello.machine, sizeof hello.machine));
    }
    ranks.push_back(Pending{fd, hello});
    if (ranks.size() < hello.size) {
      return;
    }
    std::vector<TableEntry> table(hello.size);
    for (const Pending& p : ranks) {
      std::memcpy(table[p.hello.rank].machine, p.hello.machine, kMachineBytes);
      table[p.hello.rank].listen = p.hello.listen;
    }
    Reply reply{};
    reply.status = HCCL_SUCCESS;
    reply.size = hello.size;
    for (const Pending& p : ranks) {
      answer(p.fd, reply, table);
    }
    pending_.erase(name);
    std::lock_guard<std::mutex> lock(mutex_);
    machines_.erase(name);
  }

  // A registered rank sends nothing more: readable means it went away
  // (killed while joining), and the slot is free for a new attempt.
  void dropDeparted(int fd) {
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      auto& ranks = it->second;
      const auto gone = std::find_if(ranks.begin(), ranks.end(),
                                     [&](const Pending& p) { return p.fd == fd; });
      if (gone != ranks.end()) {
        close(fd);
        ranks.erase(gone);
        if (ranks.empty()) {
          std::lock_guard<std::mutex> lock(mutex_);
          machines_.erase(it->first);
          pending_.erase(it);
        }
        return;
      }
    }
  }

  void loop() {
    for (;;) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (const auto& [name, ranks] : pending_) {
        for (const Pending& p : ranks) {
          fds.push_back({p.fd, POLLIN, 0});
        }
      }
      if (poll(fds.data(), fds.size(), -1) < 0) {
        continue; // EINTR
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents != 0) {
          dropDeparted(fds[i].fd);
        }
      }
      if (fds[0].revents & POLLIN) {
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          admit(fd);
        }
      }
    }
  }

  const int listen_fd_;
  SocketAddress address_;
  std::map<std::string, std::vector<Pending>> pending_; // server thread only
  std::mutex mutex_;
  std::map<std::string, std::set<std::string>> machines_; // who registered, by name
};

const char* typeName(HcclDataType type) {
  return hcclDataTypeName(type);
}

std::string rankList(const std::vector<uint32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return out;
}

// Moves frames between this rank and its peers, all at once: each peer has
// a queue of bytes to send and a queue of frames it is expected to send
// this rank, taken in order.
struct Pump {
  // Validates a peer's frame header and says where its payload goes.
  using Accept = std::function<HcclResult(uint32_t peer, const Frame& frame, char** payload,
                                          std::string* why)>;
  struct Out {
    std::list<Frame> headers; // kept alive until sent
    std::deque<std::pair<const char*, size_t>> pieces;
  };
  struct In {
    std::deque<Accept> expected;
    Frame header{};
    size_t header_got = 0;
    bool in_payload = false;
    char* payload = nullptr;
    size_t left = 0;
    std::string failure; // the message of a peer's failure frame
  };

  explicit Pump(size_t peers) : out(peers), in(peers) {}

  void send(uint32_t peer, const Frame& frame, const char* payload) {
    Out& o = out[peer];
    o.headers.push_back(frame);
    o.pieces.emplace_back(reinterpret_cast<const char*>(&o.headers.back()), sizeof(Frame));
    if (frame.bytes != 0) {
      o.pieces.emplace_back(payload, frame.bytes);
    }
  }
  void expect(uint32_t peer, Accept accept) { in[peer].expected.push_back(std::move(accept)); }
  bool waitsFor(uint32_t peer) const {
    return !out[peer].pieces.empty() || !in[peer].expected.empty();
  }

  std::vector<Out> out;
  std::vector<In> in;
};

} // namespace

HcclResult rendezvousServer(SocketAddress* out, std::string* why) {
  RendezvousServer* server = RendezvousServer::get(true, why);
  if (server == nullptr) {
    return HCCL_E_TCP_CONNECT;
  }
  *out = server->address();
  return HCCL_SUCCESS;
}

bool rendezvousHeardFromAnotherMachine(const std::string& name, const std::string& machine) {
  std::string unused;
  RendezvousServer* server = RendezvousServer::get(false, &unused);
  return server != nullptr && server->heardFromAnotherMachine(name, machine);
}

struct SocketTransport::Peer {
  int fd = -1;
  std::string machine;
};

SocketTransport::SocketTransport(uint32_t size, uint32_t rank, Settings settings)
    : size_(size), rank_(rank), settings_(std::move(settings)) {}

SocketTransport::~SocketTransport() {
  for (auto& p : peers_) {
    if (p != nullptr && p->fd >= 0) {
      close(p->fd);
    }
  }
}

void SocketTransport::abort(HcclResult code, const std::string& why) {
  // Only the stream worker runs collectives, and aborts come from it
  // (through Communicator::failed), so no lock is needed.
  std::vector<char> message(sizeof(Frame));
  const std::string text = why.substr(0, kFailureBytes);
  Frame failed{};
  failed.kind = kFailed;
  failed.code = static_cast<uint32_t>(code);
  failed.bytes = text.size();
  std::memcpy(message.data(), &failed, sizeof failed);
  message.insert(message.end(), text.begin(), text.end());
  for (auto& p : peers_) {
    if (p != nullptr && p->fd >= 0) {
      // Best effort, in one piece: a peer that is not reading (or whose
      // buffer is full) finds out at end of file.
      send(p->fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      shutdown(p->fd, SHUT_RDWR);
    }
  }
}

HcclResult SocketTransport::connect(const std::string& name, const SocketAddress& root,
                                    uint32_t size, uint32_t rank, const std::string& machine,
                                    Settings settings, std::unique_ptr<SocketTransport>* out,
                                    std::string* why) {
  const auto deadline = deadlineAfter(settings.connect_timeout);
  const std::string limit = formatSeconds(settings.connect_timeout);
  std::unique_ptr<SocketTransport> t(new SocketTransport(size, rank, settings));
  t->peers_.resize(size);

  uint16_t port = 0;
  const int listener = size > 1 ? listenSocket(static_cast<int>(size), &port, why) : -1;
  if (size > 1 && listener < 0) {
    return HCCL_E_TCP_CONNECT;
  }
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) {
        close(fd);
      }
    }
  } listener_closer{listener};

  int error = 0;
  const int server = connectTo(root, deadline, &error);
  if (server < 0) {
    *why = error == ETIMEDOUT
        ? "joining the communicator timed out after " + limit +
              " s connecting to the rendezvous server at " + addressText(root) +
              " (the process that made the root info). The limit is HCCL_CONNECT_TIMEOUT seconds"
        : "cannot connect to the rendezvous server at " + addressText(root) +
              " (the process that made the root info): " + std::strerror(error) +
              "; it must still run, and be reachable from this machine (HCCL_IF_IP sets the "
              "address it listens at)";
    return error == ETIMEDOUT ? HCCL_E_TIMEOUT : HCCL_E_TCP_CONNECT;
  }
  Closer server_closer{server};
  Hello hello{};
  std::memcpy(hello.magic, kHelloMagic, sizeof kHelloMagic);
  copyString(hello.name, sizeof hello.name, name);
  copyString(hello.machine, sizeof hello.machine, machine);
  hello.size = size;
  hello.rank = rank;
  hello.listen.port = port;
  std::string ip = interfaceAddress();
  if (ip.empty()) {
    // The local address this rank reached the root at: reachable from there.
    sockaddr_in local{};
    socklen_t len = sizeof local;
    getsockname(server, reinterpret_cast<sockaddr*>(&local), &len);
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
    ip = text;
  }
  copyString(hello.listen.ip, sizeof hello.listen.ip, ip);
  Reply reply{};
  error = sendAll(server, &hello, sizeof hello, deadline);
  if (error == 0) {
    error = receiveAll(server, &reply, sizeof reply, deadline);
  }
  if (error != 0) {
    *why = error == ETIMEDOUT
        ? "joining the communicator timed out after " + limit + " s (rank " +
              std::to_string(rank) + " of " + std::to_string(size) +
              ") waiting for every rank to register with the rendezvous server at " +
              addressText(root) + ": some did not arrive. The limit is HCCL_CONNECT_TIMEOUT seconds"
        : "the rendezvous server at " + addressText(root) + " closed the connection (" +
              std::strerror(error) + "): the process that made the root info exited";
    return error == ETIMEDOUT ? HCCL_E_TIMEOUT : HCCL_E_TCP_CONNECT;
  }
  if (reply.status != HCCL_SUCCESS) {
    *why = fixedString(reply.error, sizeof reply.error);
    return static_cast<HcclResult>(reply.status);
  }
  std::vector<TableEntry> table(size);
  if (reply.size != size ||
      receiveAll(server, table.data(), size * sizeof(TableEntry), deadline) != 0) {
    *why = "the rendezvous server at " + addressText(root) + " sent a broken table";
    return HCCL_E_TCP_TRANSFER;
  }
  std::set<std::string> machines;
  for (uint32_t r = 0; r < size; ++r) {
    machines.insert(fixedString(table[r].machine, kMachineBytes));
    if (r != rank) {
      t->peers_[r] = std::make_unique<Peer>();
      t->peers_[r]->machine = fixedString(table[r].machine, kMachineBytes);
    }
  }
  t->machines_ = static_cast<uint32_t>(machines.size());

  // The mesh: connect to every lower rank, accept every higher one.
  for (uint32_t r = 0; r < rank; ++r) {
    const int fd = connectTo(table[r].listen, deadline, &error);
    MeshHello mine{};
    std::memcpy(mine.magic, kHelloMagic, sizeof kHelloMagic);
    mine.rank = rank;
    mine.size = size;
    if (fd < 0 || (error = sendAll(fd, &mine, sizeof mine, deadline)) != 0) {
      if (fd >= 0) {
        close(fd);
      }
      *why = "cannot connect to rank " + std::to_string(r) + " at " +
          addressText(table[r].listen) + " (on " + t->peers_[r]->machine +
          "): " + std::strerror(error) +
          (error == ETIMEDOUT ? ". The limit is HCCL_CONNECT_TIMEOUT seconds" : "");
      return error == ETIMEDOUT ? HCCL_E_TIMEOUT : HCCL_E_TCP_CONNECT;
    }
    t->peers_[r]->fd = fd;
  }
  for (uint32_t accepted = rank + 1; accepted < size; ++accepted) {
    if (!waitFor(listener, POLLIN, deadline)) {
      std::vector<uint32_t> missing;
      for (uint32_t r = rank + 1; r < size; ++r) {
        if (t->peers_[r]->fd < 0) {
          missing.push_back(r);
        }
      }
      *why = "joining the communicator timed out after " + limit + " s waiting for rank(s) " +
          rankList(missing) + " (rank " + std::to_string(rank) + " of " + std::to_string(size) +
          ") to connect, which did not arrive. The limit is HCCL_CONNECT_TIMEOUT seconds";
      return HCCL_E_TIMEOUT;
    }
    const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    MeshHello theirs{};
    if (fd < 0 || receiveAll(fd, &theirs, sizeof theirs, deadline) != 0 ||
        std::memcmp(theirs.magic, kHelloMagic, sizeof kHelloMagic) != 0 ||
        theirs.size != size || theirs.rank <= rank || theirs.rank >= size ||
        t->peers_[theirs.rank]->fd >= 0) {
      if (fd >= 0) {
        close(fd);
      }
      --accepted; // not one of this communicator's ranks: wait on
      continue;
    }
    t->peers_[theirs.rank]->fd = fd;
  }
  for (auto& p : t->peers_) {
    if (p != nullptr) {
      setNoDelay(p->fd);
      setNonBlocking(p->fd, true);
    }
  }
  *out = std::move(t);
  return HCCL_SUCCESS;
}

std::string SocketTransport::activity() const {
  return describe(current_) + ", collective #" + std::to_string(current_.sequence) +
      " of this communicator";
}

namespace {

// Runs `pump` until every queue is empty; `late(seconds, waited)` makes the
// timeout's message from the ranks still waited for.
template <typename Late>
HcclResult runPump(Pump& pump, const std::vector<int>& fds,
                   const std::vector<std::string>& machines, uint32_t rank, double timeout,
                   Late&& late, std::string* why);

} // namespace

HcclResult SocketTransport::begin(CollectiveDescriptor what, const std::vector<uint64_t>& plan,
                                  std::vector<std::vector<uint64_t>>* plans, std::string* why) {
  what.sequence = current_.sequence + 1;
  current_ = what;
  std::vector<CollectiveDescriptor> posted(size_);
  posted[rank_] = what;
  if (plans != nullptr) {
    plans->assign(size_, {});
    (*plans)[rank_] = plan;
  }
  Pump pump(size_);
  Frame frame{};
  frame.kind = kCollective;
  frame.bytes = plan.size() * sizeof(uint64_t);
  frame.what = what;
  for (uint32_t r = 0; r < size_; ++r) {
    if (r == rank_) {
      continue;
    }
    pump.send(r, frame, reinterpret_cast<const char*>(plan.data()));
    pump.expect(r, [&, r](uint32_t, const Frame& f, char** payload, std::string* why) {
      if (f.kind == kMessage) {
        const size_t esize = hcclElementSize(static_cast<HcclDataType>(f.code));
        *why = "rank " + std::to_string(rank_) + " called " + describe(what) +
            " as collective #" + std::to_string(what.sequence) + ", rank " + std::to_string(r) +
            " sent it a message (HcclSend or HcclBatchSendRecv, count=" +
            std::to_string(esize ? f.bytes / esize : f.bytes) + ", " +
            typeName(static_cast<HcclDataType>(f.code)) +
            "): a send or receive cannot complete while its peer is inside a collective, so "
            "every rank must call the same collectives, and its sends and receives, in the "
            "same order. The communicator is aborted";
        return HCCL_E_PARA;
      }
      if (f.kind != kCollective || f.bytes > 2 * size_ * sizeof(uint64_t) ||
          f.bytes % sizeof(uint64_t) != 0) {
        *why = "rank " + std::to_string(r) + " sent a frame this rank cannot read at the start "
               "of " + activity() + "; the communicator is aborted";
        return HCCL_E_TCP_TRANSFER;
      }
      posted[r] = f.what;
      if (plans != nullptr) {
        (*plans)[r].resize(f.bytes / sizeof(uint64_t));
        *payload = reinterpret_cast<char*>((*plans)[r].data());
      } else if (f.bytes != 0) {
        scratch_.resize(f.bytes);
        *payload = scratch_.data();
      }
      return HCCL_SUCCESS;
    });
  }
  std::vector<int> fds(size_, -1);
  std::vector<std::string> machines(size_);
  for (uint32_t r = 0; r < size_; ++r) {
    if (peers_[r] != nullptr) {
      fds[r] = peers_[r]->fd;
      machines[r] = peers_[r]->machine;
    }
  }
  const HcclResult moved = runPump(
      pump, fds, machines, rank_, settings_.exec_timeout,
      [&](const std::string& seconds, const std::vector<uint32_t>& waited) {
        return activity() + " timed out after " + seconds + " s waiting for rank(s) " +
            rankList(waited) + " (rank " + std::to_string(rank_) + " of " +
            std::to_string(size_) + "), which did not arrive: every rank must call the same "
            "collectives in the same order. The limit is " + settings_.exec_timeout_origin;
      },
      why);
  if (moved != HCCL_SUCCESS) {
    return moved;
  }
  // Every rank holds every descriptor: all find the same mismatch.
  for (uint32_t r = 1; r < size_; ++r) {
    if (!collectivesAgree(posted[0], posted[r])) {
      *why = "rank 0 called " + describe(posted[0]) + " as collective #" +
          std::to_string(posted[0].sequence) + ", rank " + std::to_string(r) + " called " +
          describe(posted[r]) + " as collective #" + std::to_string(posted[r].sequence) +
          ": every rank must call the same collectives, with the same count, type, reduce "
          "op and root, in the same order. The communicator is aborted";
      return HCCL_E_PARA;
    }
  }
  return HCCL_SUCCESS;
}

HcclResult SocketTransport::moveData(const std::vector<Span>& out, const std::vector<Span>& in,
                                     std::string* why) {
  Pump pump(size_);
  std::vector<int> fds(size_, -1);
  std::vector<std::string> machines(size_);
  for (uint32_t r = 0; r < size_; ++r) {
    if (r == rank_) {
      continue;
    }
    fds[r] = peers_[r]->fd;
    machines[r] = peers_[r]->machine;
    if (out[r].bytes != 0) {
      Frame frame{};
      frame.kind = kData;
      frame.bytes = out[r].bytes;
      pump.send(r, frame, out[r].data);
    }
    if (in[r].bytes != 0) {
      pump.expect(r, [&, r](uint32_t, const Frame& f, char** payload, std::string* why) {
        if (f.kind != kData || f.bytes != in[r].bytes) {
          *why = "rank " + std::to_string(r) + " sent " + std::to_string(f.bytes) +
              " bytes where this rank expects " + std::to_string(in[r].bytes) + " during " +
              activity() + "; the communicator is aborted";
          return HCCL_E_TCP_TRANSFER;
        }
        *payload = in[r].data;
        return HCCL_SUCCESS;
      });
    }
  }
  return runPump(
      pump, fds, machines, rank_, settings_.exec_timeout,
      [&](const std::string& seconds, const std::vector<uint32_t>& waited) {
        return activity() + " timed out after " + seconds + " s moving data with rank(s) " +
            rankList(waited) + " (rank " + std::to_string(rank_) + " of " +
            std::to_string(size_) + "). The limit is " + settings_.exec_timeout_origin;
      },
      why);
}

namespace {

template <typename Late>
HcclResult runPump(Pump& pump, const std::vector<int>& fds,
                   const std::vector<std::string>& machines, uint32_t rank, double timeout,
                   Late&& late, std::string* why) {
  const auto deadline = deadlineAfter(timeout);
  const size_t n = fds.size();
  auto gone = [&](uint32_t r, int error) {
    *why = "rank " + std::to_string(r) + " (on " + machines[r] +
        ") exited or closed its connection before the collective completed (" +
        std::strerror(error) + ")";
    return HCCL_E_REMOTE;
  };
  for (;;) {
    std::vector<pollfd> polled;
    std::vector<uint32_t> ranks;
    for (uint32_t r = 0; r < n; ++r) {
      const short events = static_cast<short>((pump.out[r].pieces.empty() ? 0 : POLLOUT) |
                                              (pump.in[r].expected.empty() ? 0 : POLLIN));
      if (events != 0) {
        polled.push_back({fds[r], events, 0});
        ranks.push_back(r);
      }
    }
    if (polled.empty()) {
      return HCCL_SUCCESS;
    }
    const int ready = poll(polled.data(), polled.size(), pollMillis(deadline));
    if (ready < 0 && errno != EINTR) {
      *why = "poll() failed: " + std::string(std::strerror(errno));
      return HCCL_E_SYSCALL;
    }
    for (size_t i = 0; i < polled.size() && ready > 0; ++i) {
      const uint32_t r = ranks[i];
      const short revents = polled[i].revents;
      if (revents == 0) {
        continue;
      }
      auto& out = pump.out[r];
      while ((revents & (POLLOUT | POLLERR | POLLHUP)) && !out.pieces.empty()) {
        auto& [data, left] = out.pieces.front();
        const ssize_t sent = send(fds[r], data, left, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent < 0) {
          if (errno == EAGAIN || errno == EINTR) {
            break;
          }
          return gone(r, errno);
        }
        data += sent;
        left -= static_cast<size_t>(sent);
        if (left == 0) {
          out.pieces.pop_front();
        }
      }
      auto& in = pump.in[r];
      while ((revents & (POLLIN | POLLERR | POLLHUP)) && !in.expected.empty()) {
        char* into = in.in_payload ? in.payload
                                   : reinterpret_cast<char*>(&in.header) + in.header_got;
        const size_t want = in.in_payload ? in.left : sizeof(Frame) - in.header_got;
        ssize_t got = 0;
        if (want != 0) {
          got = recv(fds[r], into, want, MSG_DONTWAIT);
          if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
            break;
          }
          if (got <= 0) {
            return gone(r, got == 0 ? ECONNRESET : errno);
          }
        }
        if (!in.in_payload) {
          in.header_got += static_cast<size_t>(got);
          if (in.header_got < sizeof(Frame)) {
            continue;
          }
          char* payload = nullptr;
          if (in.header.kind == kFailed) {
            in.failure.resize(std::min<uint64_t>(in.header.bytes, kFailureBytes));
            in.header.bytes = in.failure.size();
            payload = in.failure.data();
          } else if (HcclResult e = in.expected.front()(r, in.header, &payload, why);
                     e != HCCL_SUCCESS) {
            return e;
          }
          in.in_payload = true;
          in.payload = payload;
          in.left = in.header.bytes;
        } else {
          in.payload += got;
          in.left -= static_cast<size_t>(got);
        }
        if (in.left == 0 && in.header.kind == kFailed) {
          *why = "rank " + std::to_string(r) + " of the communicator failed (HCCL error " +
              std::to_string(in.header.code) + ": " + in.failure + "), so rank " +
              std::to_string(rank) + " cannot complete the collective";
          return HCCL_E_REMOTE;
        }
        if (in.left == 0) {
          in.expected.pop_front();
          in.header_got = 0;
          in.in_payload = false;
        }
      }
    }
    if (processExiting()) {
      *why = "the process is exiting";
      return HCCL_E_INTERNAL;
    }
    if (Clock::now() >= deadline) {
      std::vector<uint32_t> waited;
      for (uint32_t r = 0; r < n; ++r) {
        if (pump.waitsFor(r)) {
          waited.push_back(r);
        }
      }
      *why = late(formatSeconds(timeout), waited);
      return HCCL_E_TIMEOUT;
    }
  }
}

} // namespace

HcclResult SocketTransport::allReduce(const void* send, void* recv, size_t count,
                                      HcclDataType type, HcclReduceOp op, int64_t root,
                                      std::string* why) {
  const CollectiveDescriptor what{
      root < 0 ? CollectiveKind::kAllReduce : CollectiveKind::kReduce, type, op,
      root < 0 ? CollectiveDescriptor::kNoRoot : static_cast<uint32_t>(root), count};
  if (HcclResult e = begin(what, {}, nullptr, why); e != HCCL_SUCCESS) {
    return e;
  }
  const size_t bytes = count * hcclElementSize(type);
  const bool receives = root < 0 || root == rank_;
  std::vector<char> inputs(receives ? size_ * bytes : 0);
  std::vector<Span> out(size_), in(size_);
  for (uint32_t r = 0; r < size_; ++r) {
    if (r != rank_ && (root < 0 || r == root)) {
      out[r] = {const_cast<char*>(static_cast<const char*>(send)), bytes};
    }
    if (r != rank_ && receives) {
      in[r] = {inputs.data() + r * bytes, bytes};
    }
  }
  if (HcclResult e = moveData(out, in, why); e != HCCL_SUCCESS || !receives) {
    return e;
  }
  // In rank order, as the shared-memory transport: the same bits.
  std::memcpy(inputs.data() + rank_ * bytes, send, bytes);
  for (uint32_t r = 1; r < size_; ++r) {
    reduceInto(inputs.data(), inputs.data() + r * bytes, count, type, op);
  }
  std::memcpy(recv, inputs.data(), bytes);
  return HCCL_SUCCESS;
}

HcclResult SocketTransport::broadcast(void* buf, size_t count, HcclDataType type, uint32_t root,
                                      std::string* why) {
  const CollectiveDescriptor what{CollectiveKind::kBroadcast, type, HCCL_REDUCE_RESERVED, root,
                                  count};
  if (HcclResult e = begin(what, {}, nullptr, why); e != HCCL_SUCCESS) {
    return e;
  }
  const size_t bytes = count * hcclElementSize(type);
  std::vector<Span> out(size_), in(size_);
  for (uint32_t r = 0; r < size_ && rank_ == root; ++r) {
    if (r != rank_) {
      out[r] = {static_cast<char*>(buf), bytes};
    }
  }
  if (rank_ != root) {
    in[root] = {static_cast<char*>(buf), bytes};
  }
  return moveData(out, in, why);
}

HcclResult SocketTransport::allGather(const void* send, void* recv, size_t count,
                                      HcclDataType type, std::string* why) {
  const CollectiveDescriptor what{CollectiveKind::kAllGather, type, HCCL_REDUCE_RESERVED,
                                  CollectiveDescriptor::kNoRoot, count};
  if (HcclResult e = begin(what, {}, nullptr, why); e != HCCL_SUCCESS) {
    return e;
  }
  const size_t bytes = count * hcclElementSize(type);
  // Gathered apart: the output may overlap the input peers are sent.
  std::vector<char> gathered(size_ * bytes);
  std::vector<Span> out(size_), in(size_);
  for (uint32_t r = 0; r < size_; ++r) {
    if (r != rank_) {
      out[r] = {const_cast<char*>(static_cast<const char*>(send)), bytes};
      in[r] = {gathered.data() + r * bytes, bytes};
    }
  }
  if (HcclResult e = moveData(out, in, why); e != HCCL_SUCCESS) {
    return e;
  }
  std::memcpy(gathered.data() + rank_ * bytes, send, bytes);
  std::memcpy(recv, gathered.data(), gathered.size());
  return HCCL_SUCCESS;
}

HcclResult SocketTransport::reduceScatter(const void* send, void* recv, size_t recvCount,
                                          HcclDataType type, HcclReduceOp op, std::string* why) {
  const CollectiveDescriptor what{CollectiveKind::kReduceScatter, type, op,
                                  CollectiveDescriptor::kNoRoot, recvCount};
  if (HcclResult e = begin(what, {}, nullptr, why); e != HCCL_SUCCESS) {
    return e;
  }
  const size_t bytes = recvCount * hcclElementSize(type);
  const char* input = static_cast<const char*>(send);
  std::vector<char> pieces(size_ * bytes); // every rank's piece for this one, by rank
  std::vector<Span> out(size_), in(size_);
  for (uint32_t r = 0; r < size_; ++r) {
    if (r != rank_) {
      out[r] = {const_cast<char*>(input + r * bytes), bytes};
      in[r] = {pieces.data() + r * bytes, bytes};
    }
  }
  if (HcclResult e = moveData(out, in, why); e != HCCL_SUCCESS) {
    return e;
  }
  std::memcpy(pieces.data() + rank_ * bytes, input + rank_ * bytes, bytes);
  for (uint32_t r = 1; r < size_; ++r) {
    reduceInto(pieces.data(), pieces.data() + r * bytes, recvCount, type, op);
  }
  std::memcpy(recv, pieces.data(), bytes);
  return HCCL_SUCCESS;
}

HcclResult SocketTransport::barrier(std::string* why) {
  return begin(CollectiveDescriptor{CollectiveKind::kBarrier}, {}, nullptr, why);
}

HcclResult SocketTransport::allToAllV(const char* send, const std::vector<uint64_t>& sendCounts,
                                      const std::vector<uint64_t>& sendDispls, char* recv,
                                      const std::vector<uint64_t>& recvCounts,
                                      const std::vector<uint64_t>& recvDispls,
                                      HcclDataType type, bool even, std::string* why) {
  const size_t esize = hcclElementSize(type);
  const size_t n = size_;
  const CollectiveDescriptor what{even ? CollectiveKind::kAllToAll : CollectiveKind::kAllToAllV,
                                  type};
  std::vector<uint64_t> plan(sendCounts);
  plan.insert(plan.end(), recvCounts.begin(), recvCounts.end());
  std::vector<std::vector<uint64_t>> plans;
  if (HcclResult e = begin(what, plan, &plans, why); e != HCCL_SUCCESS) {
    return e;
  }
  // Every rank holds every plan: all find the same mismatch.
  for (uint32_t from = 0; from < size_; ++from) {
    for (uint32_t to = 0; to < size_; ++to) {
      const uint64_t sent = plans[from].size() == 2 * n ? plans[from][to] : 0;
      const uint64_t expected = plans[to].size() == 2 * n ? plans[to][n + from] : 0;
      if (sent != expected) {
        *why = "rank " + std::to_string(from) + " sends " + std::to_string(sent) +
            " elements to rank " + std::to_string(to) + ", but rank " + std::to_string(to) +
            " expects " + std::to_string(expected) + " from rank " + std::to_string(from) +
            ": what each rank sends another (sendCounts) must be what that one receives "
            "from it (recvCounts)";
        return HCCL_E_PARA;
      }
    }
  }
  // Received apart: the output may overlap the input peers are sent.
  std::vector<std::vector<char>> received(size_);
  std::vector<Span> out(size_), in(size_);
  for (uint32_t r = 0; r < size_; ++r) {
    if (r == rank_) {
      received[r].assign(send + sendDispls[r] * esize,
                         send + (sendDispls[r] + sendCounts[r]) * esize);
      continue;
    }
    out[r] = {const_cast<char*>(send + sendDispls[r] * esize), sendCounts[r] * esize};
    received[r].resize(recvCounts[r] * esize);
    in[r] = {received[r].data(), received[r].size()};
  }
  if (HcclResult e = moveData(out, in, why); e != HCCL_SUCCESS) {
    return e;
  }
  for (uint32_t r = 0; r < size_; ++r) {
    if (!received[r].empty()) {
      std::memcpy(recv + recvDispls[r] * esize, received[r].data(), received[r].size());
    }
  }
  return HCCL_SUCCESS;
}

HcclResult SocketTransport::exchange(const std::vector<PeerMessage>& messages, std::string* why) {
  auto bytesOf = [](const PeerMessage& m) { return m.count * hcclElementSize(m.type); };
  // Messages of a batch to this rank itself: each send matches the next
  // receive from itself.
  std::deque<const PeerMessage*> self_sends, self_receives;
  for (const PeerMessage& m : messages) {
    if (m.peer == rank_) {
      (m.send ? self_sends : self_receives).push_back(&m);
    }
  }
  if (self_sends.size() != self_receives.size()) {
    *why = "rank " + std::to_string(rank_) + " sends itself " + std::to_string(self_sends.size()) +
        " messages but receives " + std::to_string(self_receives.size()) +
        " from itself: every send needs a matching receive";
    return HCCL_E_PARA;
  }
  for (size_t i = 0; i < self_sends.size(); ++i) {
    const PeerMessage& s = *self_sends[i];
    const PeerMessage& r = *self_receives[i];
    if (bytesOf(s) != bytesOf(r) || s.type != r.type) {
      *why = "rank " + std::to_string(rank_) + " sends itself " + std::to_string(s.count) +
          " elements of " + hcclDataTypeName(s.type) + " but receives " +
          std::to_string(r.count) + " elements of " + hcclDataTypeName(r.type) +
          ": a receive must match its send in count and type";
      return HCCL_E_PARA;
    }
    if (bytesOf(s) != 0) {
      std::memmove(r.data, s.data, bytesOf(s));
    }
  }
  Pump pump(size_);
  std::vector<int> fds(size_, -1);
  std::vector<std::string> machines(size_);
  for (uint32_t r = 0; r < size_; ++r) {
    if (peers_[r] != nullptr) {
      fds[r] = peers_[r]->fd;
      machines[r] = peers_[r]->machine;
    }
  }
  for (const PeerMessage& m : messages) {
    if (m.peer == rank_) {
      continue;
    }
    if (m.send) {
      Frame frame{};
      frame.kind = kMessage;
      frame.code = static_cast<uint32_t>(m.type);
      frame.bytes = bytesOf(m);
      pump.send(m.peer, frame, m.data);
      continue;
    }
    pump.expect(m.peer, [&, &m = m](uint32_t peer, const Frame& f, char** payload,
                                     std::string* why) {
      if (f.kind == kCollective) {
        *why = "rank " + std::to_string(peer) + " called " + describe(f.what) +
            " as collective #" + std::to_string(f.what.sequence) + ", rank " +
            std::to_string(rank_) + " called HcclRecv(count=" + std::to_string(m.count) + ", " +
            typeName(m.type) + ", from rank " + std::to_string(peer) +
            "): a send or receive cannot complete while its peer is inside a collective, so "
            "every rank must call the same collectives, and its sends and receives, in the "
            "same order. The communicator is aborted";
        return HCCL_E_PARA;
      }
      const auto their_type = static_cast<HcclDataType>(f.code);
      if (f.kind != kMessage || f.bytes != bytesOf(m) || their_type != m.type) {
        const size_t their_esize = hcclElementSize(their_type);
        *why = "rank " + std::to_string(peer) + " sends " +
            std::to_string(their_esize ? f.bytes / their_esize : f.bytes) + " elements of " +
            hcclDataTypeName(their_type) + ", but rank " + std::to_string(rank_) + " receives " +
            std::to_string(m.count) + " elements of " + hcclDataTypeName(m.type) +
            ": a receive must match its send in count and type";
        return HCCL_E_PARA;
      }
      *payload = m.data;
      return HCCL_SUCCESS;
    });
  }
  return runPump(
      pump, fds, machines, rank_, settings_.exec_timeout,
      [&](const std::string& seconds, const std::vector<uint32_t>& waited) {
        return "timed out after " + seconds + " s (rank " + std::to_string(rank_) + " of " +
            std::to_string(size_) + ") waiting for rank(s) " + rankList(waited) +
            " to take or send their part of this rank's sends and receives: every send needs "
            "a matching receive on its peer. The limit is " + settings_.exec_timeout_origin;
      },
      why);
}

} // namespace npu_sim
