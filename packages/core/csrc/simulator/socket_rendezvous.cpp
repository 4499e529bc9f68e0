#include "socket_rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace npu_sim {

namespace {

constexpr char kRegisterMagic[16] = "npu-sim-hccl/v2";
constexpr size_t kMachineBytes = 160;
// How much longer than its own deadline a rank waits for the server's answer
// (Note [Who did not register]).
constexpr std::chrono::seconds kAnswerGrace{2};

// What a rank sends the server, and what the server answers: a Reply, and
// when it succeeded, one TableEntry per rank, by rank.
struct Hello {
  char magic[16];
  char name[96];
  char machine[kMachineBytes];
  uint32_t size;
  uint32_t rank;
  int32_t physical_device; // Note [One device per rank of a machine]
  SocketAddress listen;
  // How long the rank waits for the others (its HCCL_CONNECT_TIMEOUT left),
  // so that the server, which knows who registered, can tell it who did
  // not arrive (Note [Who did not register]).
  uint64_t wait_ms;
};
struct Reply {
  uint32_t status; // an HcclResult
  uint32_t size;
  char error[512];
};
struct TableEntry {
  char machine[kMachineBytes];
  int32_t physical_device;
  SocketAddress listen;
};

// The process's rendezvous server (Note [Socket transport]). Never
// destroyed: its thread waits in poll() until the process exits.
class RendezvousServer {
 public:
  // This process's server on `port` (0: the one on a port the kernel
  // picked); started unless `start` is false (then null when there is none).
  static RendezvousServer* get(uint16_t port, bool start, std::string* why) {
    static std::mutex mutex;
    static std::map<uint16_t, RendezvousServer*> servers;
    std::lock_guard<std::mutex> lock(mutex);
    RendezvousServer*& server = servers[port];
    if (server == nullptr && start) {
      uint16_t bound = port;
      const int fd = listenSocket(128, &bound, why);
      if (fd < 0) {
        return nullptr;
      }
      server = new RendezvousServer(fd);
      const std::string ip = interfaceAddress();
      copyString(server->address_.ip, sizeof server->address_.ip, ip.empty() ? hostAddress() : ip);
      server->address_.port = bound;
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
    SocketClock::time_point deadline;
  };

  explicit RendezvousServer(int fd) : listen_fd_(fd) {}

  static void answer(int fd, const Reply& reply, const std::vector<TableEntry>& table) {
    const auto deadline = SocketClock::now() + std::chrono::seconds(5);
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
    if (receiveAll(fd, &hello, sizeof hello, SocketClock::now() + std::chrono::seconds(5)) != 0 ||
        std::memcmp(hello.magic, kRegisterMagic, sizeof kRegisterMagic) != 0) {
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
    ranks.push_back(
        Pending{fd, hello, SocketClock::now() + std::chrono::milliseconds(hello.wait_ms)});
    if (ranks.size() < hello.size) {
      return;
    }
    std::vector<TableEntry> table(hello.size);
    for (const Pending& p : ranks) {
      std::memcpy(table[p.hello.rank].machine, p.hello.machine, kMachineBytes);
      table[p.hello.rank].physical_device = p.hello.physical_device;
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

  // Note [Who did not register]
  // A rank that registered waits for the table until its HCCL_CONNECT_TIMEOUT
  // ends. Only the server knows which ranks did register, so each rank sends
  // how long it will wait, and when that time is up the server answers it
  // with HCCL_E_TIMEOUT and the ranks that are missing; the rank waits a
  // little longer than it told the server (kAnswerGrace in registerRank) to
  // hear that answer, and falls back to a message without names only when
  // the server is too slow to give it.
  void refuseLate(SocketClock::time_point now) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto& ranks = it->second;
      const uint32_t size = ranks.empty() ? 0 : ranks.front().hello.size;
      std::vector<bool> arrived(size, false);
      for (const Pending& p : ranks) {
        arrived[p.hello.rank] = true;
      }
      std::string missing;
      for (uint32_t r = 0; r < size; ++r) {
        if (!arrived[r]) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        }
      }
      const auto late = std::partition(ranks.begin(), ranks.end(),
                                       [&](const Pending& p) { return p.deadline > now; });
      for (auto p = late; p != ranks.end(); ++p) {
        refuse(p->fd, HCCL_E_TIMEOUT,
               "rank(s) " + missing + " of " + std::to_string(size) +
                   " did not register (" + std::to_string(ranks.size()) + " did)");
      }
      ranks.erase(late, ranks.end());
      if (ranks.empty()) {
        std::lock_guard<std::mutex> lock(mutex_);
        machines_.erase(it->first);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Milliseconds until the first pending rank's deadline, -1 for none.
  int nextDeadlineMs(SocketClock::time_point now) const {
    auto first = SocketClock::time_point::max();
    for (const auto& [name, ranks] : pending_) {
      for (const Pending& p : ranks) {
        first = std::min(first, p.deadline);
      }
    }
    if (first == SocketClock::time_point::max()) {
      return -1;
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(first - now).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, 60'000));
  }

  void loop() {
    for (;;) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (const auto& [name, ranks] : pending_) {
        for (const Pending& p : ranks) {
          fds.push_back({p.fd, POLLIN, 0});
        }
      }
      const int ready = poll(fds.data(), fds.size(), nextDeadlineMs(SocketClock::now()));
      refuseLate(SocketClock::now());
      if (ready <= 0) {
        continue; // EINTR, or only deadlines passed
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

} // namespace

HcclResult rendezvousServer(SocketAddress* out, std::string* why) {
  RendezvousServer* server = RendezvousServer::get(0, true, why);
  if (server == nullptr) {
    return HCCL_E_TCP_CONNECT;
  }
  *out = server->address();
  return HCCL_SUCCESS;
}

HcclResult rendezvousServerOn(uint16_t port, std::string* why) {
  return RendezvousServer::get(port, true, why) != nullptr ? HCCL_SUCCESS : HCCL_E_TCP_CONNECT;
}

bool rendezvousHeardFromAnotherMachine(const std::string& name, const std::string& machine) {
  std::string unused;
  RendezvousServer* server = RendezvousServer::get(0, false, &unused);
  return server != nullptr && server->heardFromAnotherMachine(name, machine);
}

HcclResult registerRank(const std::string& name, const SocketAddress& root, uint32_t size,
                        uint32_t rank, const std::string& machine, int32_t physical_device,
                        uint16_t listen_port, SocketClock::time_point deadline,
                        const std::string& limit, std::vector<RankEndpoint>* table,
                        std::string* why) {
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
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } server_closer{server};
  Hello hello{};
  std::memcpy(hello.magic, kRegisterMagic, sizeof kRegisterMagic);
  copyString(hello.name, sizeof hello.name, name);
  copyString(hello.machine, sizeof hello.machine, machine);
  hello.size = size;
  hello.rank = rank;
  hello.physical_device = physical_device;
  hello.listen.port = listen_port;
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
  hello.wait_ms = static_cast<uint64_t>(std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SocketClock::now())
             .count()));
  Reply reply{};
  error = sendAll(server, &hello, sizeof hello, deadline);
  if (error == 0) {
    // Note [Who did not register]: the server answers when `deadline`
    // passes, naming the missing ranks; wait a little longer to hear it.
    error = receiveAll(server, &reply, sizeof reply, deadline + kAnswerGrace);
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
  if (reply.status == HCCL_E_TIMEOUT) {
    *why = "joining the communicator timed out after " + limit + " s (rank " +
        std::to_string(rank) + " of " + std::to_string(size) +
        ") waiting for every rank to register with the rendezvous server at " +
        addressText(root) + ": " + fixedString(reply.error, sizeof reply.error) +
        ". The limit is HCCL_CONNECT_TIMEOUT seconds";
    return HCCL_E_TIMEOUT;
  }
  if (reply.status != HCCL_SUCCESS) {
    *why = fixedString(reply.error, sizeof reply.error);
    return static_cast<HcclResult>(reply.status);
  }
  std::vector<TableEntry> entries(size);
  if (reply.size != size ||
      receiveAll(server, entries.data(), size * sizeof(TableEntry), deadline) != 0) {
    *why = "the rendezvous server at " + addressText(root) + " sent a broken table";
    return HCCL_E_TCP_TRANSFER;
  }
  table->clear();
  for (const TableEntry& e : entries) {
    table->push_back(
        RankEndpoint{fixedString(e.machine, sizeof e.machine), e.physical_device, e.listen});
  }
  return HCCL_SUCCESS;
}

} // namespace npu_sim
