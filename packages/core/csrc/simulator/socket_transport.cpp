#include "socket_transport.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <set>

#include "collective_reduce.h"
#include "rank_devices.h"
#include "runtime.h"
#include "socket_io.h"
#include "socket_rendezvous.h"

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
//   registered, the server answers each with the table of all ranks; a rank
//   whose HCCL_CONNECT_TIMEOUT ends first is told which ranks did not
//   register (Note [Who did not register], socket_rendezvous.cpp). A rank
//   table listing several servers has no root info: its rank 0 runs the
//   server on HCCL_IF_BASE_PORT, every rank derives the address from the
//   table (rank 0's server_id), and all ranks register at once.
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

using Clock = SocketClock;

constexpr char kMeshMagic[16] = "npu-sim-hccl/tc";
// The most of a failing rank's message its peers are sent.
constexpr size_t kFailureBytes = 2048;

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

std::string formatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

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
                                    int32_t physical_device, Settings settings, std::unique_ptr<SocketTransport>* out,
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

  std::vector<RankEndpoint> table;
  if (HcclResult r = registerRank(name, root, size, rank, machine, physical_device, port,
                                  deadline, limit, &table, why);
      r != HCCL_SUCCESS) {
    return r;
  }
  // Note [One device per rank of a machine]
  std::vector<std::string> rank_machines(size);
  std::vector<int32_t> rank_devices(size);
  for (uint32_t r = 0; r < size; ++r) {
    rank_machines[r] = table[r].machine;
    rank_devices[r] = table[r].physical_device;
  }
  if (HcclResult r = refuseSharedDevices(rank_machines, rank_devices, why); r != HCCL_SUCCESS) {
    return r;
  }
  int error = 0;
  std::set<std::string> machines;
  for (uint32_t r = 0; r < size; ++r) {
    machines.insert(table[r].machine);
    if (r != rank) {
      t->peers_[r] = std::make_unique<Peer>();
      t->peers_[r]->machine = table[r].machine;
    }
  }
  t->machines_ = static_cast<uint32_t>(machines.size());

  // The mesh: connect to every lower rank, accept every higher one.
  for (uint32_t r = 0; r < rank; ++r) {
    const int fd = connectTo(table[r].listen, deadline, &error);
    MeshHello mine{};
    std::memcpy(mine.magic, kMeshMagic, sizeof kMeshMagic);
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
        std::memcmp(theirs.magic, kMeshMagic, sizeof kMeshMagic) != 0 ||
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
  std::vector<int> fds;
  std::vector<std::string> machines;
  peerEndpoints(&fds, &machines);
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

void SocketTransport::peerEndpoints(std::vector<int>* fds,
                                    std::vector<std::string>* machines) const {
  fds->assign(size_, -1);
  machines->assign(size_, std::string());
  for (uint32_t r = 0; r < size_; ++r) {
    if (peers_[r] != nullptr) {
      (*fds)[r] = peers_[r]->fd;
      (*machines)[r] = peers_[r]->machine;
    }
  }
}

HcclResult SocketTransport::moveData(const std::vector<Span>& out, const std::vector<Span>& in,
                                     std::string* why) {
  Pump pump(size_);
  std::vector<int> fds;
  std::vector<std::string> machines;
  peerEndpoints(&fds, &machines);
  for (uint32_t r = 0; r < size_; ++r) {
    if (r == rank_) {
      continue;
    }
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
  std::vector<int> fds;
  std::vector<std::string> machines;
  peerEndpoints(&fds, &machines);
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
