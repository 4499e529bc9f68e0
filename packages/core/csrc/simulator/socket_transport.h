// The simulated HCCL between machines: the ranks of a communicator that do
// not all run on one machine meet through TCP instead of a shared-memory
// segment (Note [Socket transport], socket_transport.cpp).
//
// The process that makes a root info (HcclGetRootInfo) runs a rendezvous
// server and writes its address into the root info (socket_rendezvous.h);
// every rank tells it where it listens, the server answers with the table
// of all ranks, and the ranks connect to each other, a full mesh. Collectives and point-to-point
// messages then move over those connections, each rank combining in rank
// order, so results are bit-identical to the shared-memory transport's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collective_comm.h"
#include "hccl_types.h"
#include "socket_io.h"
#include "socket_rendezvous.h"

namespace npu_sim {

class SocketTransport {
 public:
  struct Settings {
    double connect_timeout;
    double exec_timeout; // infinity: no limit
    std::string exec_timeout_origin;
  };
  // Registers rank `rank` of `size` (on `machine`, device `physical_device`)
  // with the rendezvous server at `root` and connects to every other rank,
  // within settings.connect_timeout seconds.
  static HcclResult connect(const std::string& name, const SocketAddress& root, uint32_t size,
                            uint32_t rank, const std::string& machine, int32_t physical_device,
                            Settings settings,
                            std::unique_ptr<SocketTransport>* out, std::string* why);
  ~SocketTransport(); // closes the connections
  SocketTransport(const SocketTransport&) = delete;
  SocketTransport& operator=(const SocketTransport&) = delete;

  // How many machines the ranks run on.
  uint32_t machines() const { return machines_; }

  // The collectives of Communicator, with the same arguments and results.
  // On failure they return the error with `why` set; the caller then
  // aborts the communicator and calls abort().
  HcclResult allReduce(const void* send, void* recv, size_t count, HcclDataType type,
                       HcclReduceOp op, int64_t root, std::string* why);
  HcclResult broadcast(void* buf, size_t count, HcclDataType type, uint32_t root,
                       std::string* why);
  HcclResult allGather(const void* send, void* recv, size_t count, HcclDataType type,
                       std::string* why);
  HcclResult reduceScatter(const void* send, void* recv, size_t recvCount, HcclDataType type,
                           HcclReduceOp op, std::string* why);
  HcclResult barrier(std::string* why);
  HcclResult allToAllV(const char* send, const std::vector<uint64_t>& sendCounts,
                       const std::vector<uint64_t>& sendDispls, char* recv,
                       const std::vector<uint64_t>& recvCounts,
                       const std::vector<uint64_t>& recvDispls, HcclDataType type, bool even,
                       std::string* why);
  HcclResult exchange(const std::vector<PeerMessage>& messages, std::string* why);

  // Tells every peer that this rank failed with `code` and why (best
  // effort) and closes the connections; later calls fail.
  void abort(HcclResult code, const std::string& why);

 private:
  struct Peer;
  SocketTransport(uint32_t size, uint32_t rank, Settings settings);

  // Starts the collective `what`: sends its descriptor (and `plan`, the
  // all-to-all counts) to every peer, receives theirs, and checks that all
  // ranks run the same collective (Note [Collective descriptors]). `plans`
  // gets every rank's plan, by rank.
  HcclResult begin(CollectiveDescriptor what, const std::vector<uint64_t>& plan,
                   std::vector<std::vector<uint64_t>>* plans, std::string* why);
  // "HcclAllReduce(count=4, float32, sum), collective #3 of this communicator".
  std::string activity() const;
  // Sends `out[r]` to and receives `in[r]` from every peer r at once; each
  // is one data frame of exactly that many bytes (empty spans move nothing).
  struct Span {
    char* data = nullptr;
    size_t bytes = 0;
  };
  HcclResult moveData(const std::vector<Span>& out, const std::vector<Span>& in,
                      std::string* why);
  // The peers' sockets and machine names by rank, as the pump takes them
  // (-1 and "" for this rank).
  void peerEndpoints(std::vector<int>* fds, std::vector<std::string>* machines) const;

  const uint32_t size_;
  const uint32_t rank_;
  const Settings settings_;
  uint32_t machines_ = 1;
  std::vector<std::unique_ptr<Peer>> peers_; // by rank; null for this rank
  CollectiveDescriptor current_{};
  std::vector<char> scratch_;
};

} // namespace npu_sim
