// A communicator of the simulated HCCL: the ranks of one job, each a device
// of its own process, joined through one shared-memory region that plays
// the part of the interconnect (a segment without a name: Note [Shared
// segments], shared_segment.cpp).
//
// The region holds a small header (who attached, each rank's progress) and
// one transfer buffer per rank (HCCL's "CCL buffer", HCCL_BUFFSIZE MiB).
// A collective runs as device work on the caller's stream: each rank copies
// its data into its own buffer, the ranks meet at a barrier, and each reads
// what it needs from the others' buffers. Data larger than a buffer moves in
// chunks. Every rank combines the inputs in rank order, so all ranks get
// bit-identical results, as with HCCL's deterministic mode.
//
// Where the kernel lets the ranks reach each other's memory, collectives
// skip the transfer buffers: each rank reads its peers' device buffers
// directly, through mappings of their device memory when every rank's heap
// is shared, else with cross-memory attach (Note [Direct collectives] in
// collective_comm.cpp); the results are the same bits.
//
// Point-to-point messages (HcclSend/HcclRecv/HcclBatchSendRecv) involve two
// ranks only, so they do not use the meeting points: each ordered pair of
// ranks has a channel in the header, and a message moves through the
// sender's buffer one chunk at a time, the receiver acknowledging each. See
// Note [Point-to-point channels] in collective_comm.cpp.
//
// Every collective first publishes what it is (its descriptor) at its first
// meeting, and every rank checks that all ranks called the same collective
// before it moves any data (Note [Collective descriptors]).
//
// Waiting for peers: a short spin, then a futex on the shared header. A peer
// that died, a peer whose collective failed, a mismatched collective, or the
// exec timeout passing without progress fail the collective with a message
// naming the collective and the ranks; the communicator is then aborted
// (HcclGetCommAsyncError, and every later call fails saying why), as a real
// one is.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hccl_types.h"
#include "peer_memory.h"

namespace npu_sim {

struct CommRegion; // the shared header, in collective_comm.cpp
class SocketTransport; // between machines: Note [Socket transport], socket_transport.cpp
struct SocketAddress;  // socket_io.h
struct Channel;    // one sender-receiver pair's state, in collective_comm.cpp
class Device;      // device.h

// The collectives, as descriptors name them. HcclAlltoAll is the even case
// of HcclAlltoAllV: the two agree with each other.
enum class CollectiveKind : uint32_t {
  kAllReduce = 1,
  kReduce,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kBarrier,
  kAllToAll,
  kAllToAllV,
};

// What a rank's collective is: every rank publishes it at the collective's
// first meeting and checks the others' (Note [Collective descriptors]).
struct CollectiveDescriptor {
  static constexpr uint32_t kNoRoot = UINT32_MAX;

  CollectiveKind kind{}; // 0: none
  HcclDataType type = HCCL_DATA_TYPE_RESERVED; // none for a barrier
  HcclReduceOp op = HCCL_REDUCE_RESERVED;      // none unless it reduces
  uint32_t root = kNoRoot;
  uint64_t count = 0;    // elements per rank as the API takes them (0 for all-to-all)
  uint64_t sequence = 0; // 1 for the communicator's first collective
};

// "HcclAllReduce(count=1024, float32, sum)".
std::string describe(const CollectiveDescriptor& d);

// Whether two ranks' collectives can run together. The per-pair counts of
// an all-to-all are checked apart.
bool collectivesAgree(const CollectiveDescriptor& a, const CollectiveDescriptor& b);

// How a communicator's collectives move data, from worst to best; the
// values are npuSimHcclCommTransport's (npu_sim_ext.h). Note [Direct
// collectives] in collective_comm.cpp.
enum class Transport : uint32_t {
  kStaging = 1,     // through the shared transfer buffers
  kCrossMemory = 2, // reads of the peers' buffers with process_vm_readv
  kMapped = 3,      // reads of the peers' buffers through mappings of their device memory
  kSockets = 4,     // over TCP, between machines (Note [Socket transport])
};

// One message of a point-to-point exchange, at a host-accessible address.
struct PeerMessage {
  bool send;     // a send to `peer`; otherwise a receive from it
  uint32_t peer; // a rank of the communicator (this rank too, within a batch)
  char* data;    // nullptr when count is 0
  uint64_t count;
  HcclDataType type;
};

class Communicator {
 public:
  // Attaches rank `rank` of `nRanks` to the job `root` names and waits
  // (HCCL_CONNECT_TIMEOUT seconds) until every rank has attached. `device`
  // is the calling thread's (logical) device, `physical_device` its
  // physical id (Note [One device per rank of a machine]). `config` (may be
  // null) sets the buffer size and exec timeout, taking precedence over
  // HCCL_BUFFSIZE and HCCL_EXEC_TIMEOUT.
  static HcclResult create(const HcclRootInfo& root, uint32_t nRanks, uint32_t rank,
                           uint32_t device, int32_t physical_device, const HcclCommConfig* config,
                           std::shared_ptr<Communicator>* out, std::string* why);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  uint32_t rank() const { return rank_; }
  uint32_t size() const { return size_; }
  uint32_t device() const { return device_; }
  const std::string& name() const { return name_; }

  // The first error of a collective on this rank, or HCCL_SUCCESS.
  HcclResult asyncError() const { return error_.load(std::memory_order_acquire); }
  // HCCL_SUCCESS, or the first error with a message saying that the
  // communicator is aborted and why.
  HcclResult checkUsable(std::string* why) const;

  // The collectives, on host-accessible addresses, run by a stream's worker.
  // Each checks first that every rank runs the same collective (Note
  // [Collective descriptors]).
  // `root` < 0 for allReduce: every rank receives the result; otherwise only
  // that rank does (HcclReduce).
  HcclResult allReduce(const void* send, void* recv, size_t count, HcclDataType type,
                       HcclReduceOp op, int64_t root, std::string* why);
  HcclResult broadcast(void* buf, size_t count, HcclDataType type, uint32_t root,
                       std::string* why);
  HcclResult allGather(const void* send, void* recv, size_t count, HcclDataType type,
                       std::string* why);
  HcclResult reduceScatter(const void* send, void* recv, size_t recvCount, HcclDataType type,
                           HcclReduceOp op, std::string* why);
  HcclResult barrier(std::string* why);
  // All-to-all with per-pair element counts and displacements (HcclAlltoAllV;
  // HcclAlltoAll is the `even` case). Every rank checks first that what each
  // rank sends each other matches what that one expects to receive.
  HcclResult allToAllV(const char* send, const std::vector<uint64_t>& sendCounts,
                       const std::vector<uint64_t>& sendDispls, char* recv,
                       const std::vector<uint64_t>& recvCounts,
                       const std::vector<uint64_t>& recvDispls, HcclDataType type,
                       bool even, std::string* why);
  // Sends and receives `messages` together (a send and a receive between the
  // same two ranks cannot deadlock); messages between one pair of ranks
  // match in order. A receive whose size or type differs from the matching
  // send fails both ranks.
  HcclResult exchange(const std::vector<PeerMessage>& messages, std::string* why);

  // Note [Collective wait times]
  // While device activity is recorded, the work running a collective (or
  // point-to-point batch) asks the communicator to time its waits: every
  // wait for peers (a meeting, a channel handshake) adds the time from
  // entering it until the peers were there to `wait_ns`; the first wait of
  // the work is also its `sync_ns`: for a collective, the wait at its first
  // meeting, before any rank reads another's data (the ranks' arrival skew
  // as this rank saw it). A rank that arrives late waits little; its peers
  // wait about as long as it was late. The record of the work carries both
  // (npuSimActivityRecord waitNs/syncNs), and the profiler reports them as
  // communication.json's Wait and Synchronization Time. Not timed (no clock
  // read) while recording is off. Stream worker only, as meetings_.
  struct WaitTimes {
    int64_t wait_ns = 0;
    int64_t sync_ns = 0;
  };
  // Starts timing the waits of the next work from zero (on), or stops.
  void timeWaits(bool on) {
    timing_waits_ = on;
    waits_ = WaitTimes{};
    waited_ = false;
  }
  WaitTimes waitTimes() const { return waits_; }

  // Whether collectives read the peers' buffers directly (Note [Direct
  // collectives], collective_comm.cpp) rather than through the transfer
  // buffers; the same on every rank, decided when the communicator is made.
  bool direct() const { return direct_; }
  // How collectives move data; decided when the communicator is made.
  Transport transport() const {
    return sockets_ != nullptr ? Transport::kSockets : transport_;
  }
  // Whether the ranks meet over TCP (Note [Socket transport]), not through
  // a shared segment of one machine; decided when the communicator is made.
  bool usesSockets() const { return sockets_ != nullptr; }

 private:
  Communicator(std::string name, uint32_t size, uint32_t rank, uint32_t device,
               double exec_timeout, std::string exec_timeout_origin);

  char* slot(uint32_t r) const;
  // Runs the collective `what`: publishes it, then moves `count` elements in
  // chunks of at most `chunk`: for each chunk, each of `phases(offset,
  // length)` in turn, every one followed by a meeting. After the first
  // meeting, checks that every rank runs `what` (Note [Collective
  // descriptors]). With no elements there is that one meeting only.
  template <typename... Phase>
  HcclResult runCollective(CollectiveDescriptor what, size_t count, size_t chunk,
                           std::string* why, Phase&&... phases);
  // The chunked data movement of runCollective, after begin().
  template <typename... Phase>
  HcclResult inChunks(size_t count, size_t chunk, std::string* why, Phase&&... phases);
  // Starts the collective `what` (sequence number, published descriptor).
  HcclResult begin(CollectiveDescriptor what, std::string* why);
  // After the first meeting of the current collective: fails every rank,
  // with the same message naming both sides, unless all ranks run it.
  HcclResult checkAgreement(std::string* why);
  // Fails (and marks the communicator failed) when another rank's
  // collective failed.
  HcclResult checkNoRankFailed(std::string* why);
  // Waits until every rank has reached this rank's next meeting point.
  // `stuck`, if set, is asked whenever the wait goes on, as await()'s (the
  // joining meeting's switch to TCP: Note [Socket transport]).
  HcclResult meet(double timeout_seconds, std::string* why,
                  const std::function<HcclResult()>& stuck = nullptr);
  // "HcclAllReduce(count=4, float32, sum), collective #3 of this
  // communicator", or "joining the communicator" before the first one.
  std::string activity() const;
  // Waits until `ready()`; fails (and marks the communicator failed) when a
  // rank failed, a rank of `watched` exited, or `timeout_seconds` passed
  // (`late()` then names what was awaited).
  template <typename Ready, typename Late>
  HcclResult await(Ready&& ready, const std::vector<uint32_t>& watched, double timeout_seconds,
                   Late&& late, std::string* why);
  // As above; `stuck()` is asked too whenever the wait goes on, and ends it
  // with its error unless it returns HCCL_SUCCESS.
  template <typename Ready, typename Late, typename Stuck>
  HcclResult await(Ready&& ready, const std::vector<uint32_t>& watched, double timeout_seconds,
                   Late&& late, Stuck&& stuck, std::string* why);
  // The error of a send or receive of rank `p2p_rank` that faces collective
  // #`sequence` of rank `collective_rank` (Note [Point-to-point meets a
  // collective], collective_comm.cpp).
  std::string pointToPointMismatch(uint32_t collective_rank, uint32_t p2p_rank,
                                   uint64_t sequence) const;
  Channel& channel(uint32_t from, uint32_t to) const;
  void ring();

  // Note [Direct collectives]
  // At creation, after every rank attached: each rank tries to read (and
  // map) every peer, and all ranks set transport_ alike, to the worst of
  // their bests (direct_: anything but staging).
  HcclResult chooseTransport(double timeout_seconds, std::string* why);
  // Publishes this rank's device heap for the peers to map, when it is
  // shared or can be made so (Note [Device heap kind]); before the joining
  // meeting.
  void publishHeap();
  // Makes `device`'s private heap shared when this rank may read its peers
  // through mappings; false when it stays private.
  bool shareHeapForPeers(Device& device);
  // Maps every peer's device heap; false (and maps none) unless all are
  // shared and the kernel lets this process map them.
  bool mapPeerHeaps();
  // Where [remote, remote + bytes) of rank r's process is in this one,
  // through the mapping of r's device heap; null when it is not inside
  // that heap (another kind of memory) or there is no mapping.
  const char* peerView(uint32_t r, uintptr_t remote, size_t bytes) const;
  // The same view, writable (Note [All-reduce writes every rank's share]).
  char* peerOutput(uint32_t r, uintptr_t remote, size_t bytes);
  // Whether every rank's send and receive buffers of the current
  // collective (`bytes` each) lie in device heaps mapped here: decided
  // from what the ranks published, so every rank decides alike.
  bool buffersInMappedHeaps(size_t bytes) const;
  // Publishes this rank's buffers of the current collective for its peers
  // (host addresses; either may be null).
  void publishBuffers(const void* send, const void* recv);
  // Starts the direct collective `what` whose buffers here are `send` and
  // `recv` (host addresses; either may be null): publishes them, meets, and
  // checks that every rank runs `what` and none has failed.
  HcclResult beginDirect(CollectiveDescriptor what, const void* send, const void* recv,
                         std::string* why);
  // The last meeting of a direct collective: after it no peer reads this
  // rank's buffers any more, so the stream may reuse or free them.
  HcclResult endDirect(std::string* why);
  // Rank r's send or receive buffer of the current collective, in its process.
  uintptr_t peerSend(uint32_t r) const;
  uintptr_t peerRecv(uint32_t r) const;
  // Copies `bytes` at `remote` in rank r's process to `local` (a plain copy
  // when r is this rank); a rank that exited fails the collective naming it.
  // `bypass_cache`: `local` is part of a large output (Note [Bulk copies
  // bypass the cache], bulk_copy.cpp).
  HcclResult readFrom(uint32_t r, uintptr_t remote, void* local, size_t bytes,
                      std::string* why, bool bypass_cache = false);
  // out[0, count) = inputs[0] (op) inputs[1] (op) ... in rank order, where
  // inputs[r] is an address in rank r's process (inputs[rank_] one here).
  // `bypass_cache`: `out` is a large output (Note [Bulk reductions bypass
  // the cache], bulk_reduce.cpp).
  HcclResult reduceFrom(const std::vector<uintptr_t>& inputs, char* out, size_t count,
                        HcclDataType type, HcclReduceOp op, std::string* why,
                        bool bypass_cache = false);
  HcclResult allReduceDirect(const char* send, char* recv, size_t count, HcclDataType type,
                             HcclReduceOp op, int64_t root, const CollectiveDescriptor& what,
                             std::string* why);
  // This rank's share [lo, hi) of an all-reduce, combined from every
  // rank's input and written to every rank's output (Note [All-reduce
  // writes every rank's share]).
  HcclResult reduceShareToEveryRank(size_t lo, size_t hi, HcclDataType type, HcclReduceOp op,
                                    std::string* why);
  // Runs `run` (a collective of sockets_) on a usable communicator; a
  // failure aborts the communicator.
  template <typename Run>
  HcclResult overSockets(Run&& run, std::string* why);
  // Aborts the communicator with `code` and the message in `why` (the
  // first failure wins) and tells the other ranks; returns `code`.
  HcclResult failed(HcclResult code, std::string* why);

  const std::string name_;
  const uint32_t size_;
  const uint32_t rank_;
  const uint32_t device_;
  // How long a collective waits for its peers (infinity: no limit), from the
  // config or HCCL_EXEC_TIMEOUT, read when the communicator is made; and
  // where that limit came from, for error messages.
  const double exec_timeout_;
  const std::string exec_timeout_origin_;
  CommRegion* region_ = nullptr;
  size_t region_bytes_ = 0;
  size_t slot_bytes_ = 0;
  char* slots_ = nullptr;
  // Two buffers per rank for small all-reduces, by rank then parity (Note
  // [Small all-reduces meet once], collective_comm.cpp).
  char* small_ = nullptr;
  Channel* channels_ = nullptr; // size_ * size_, by sender then receiver
  std::vector<uint32_t> all_ranks_; // 0 .. size_ - 1, whom a meeting waits for
  uint64_t meetings_ = 0; // meeting points passed; only the stream worker touches it
  // The collective under way (kind 0 before the first); stream worker only.
  CollectiveDescriptor current_{};
  bool checked_ = false; // current_ was checked against the other ranks'
  // Note [Collective wait times]; stream worker only.
  bool timing_waits_ = false;
  bool waited_ = false; // a wait of the current work was timed (sync_ns is set)
  WaitTimes waits_;
  // Note [Direct collectives]: set once by chooseTransport.
  bool direct_ = false;
  Transport transport_ = Transport::kStaging;
  // By rank, with the mapped transport: each peer's device heap here, and
  // the host address of its start in the peer's process (empty, 0 for this
  // rank). Unmapped with the communicator.
  std::vector<PeerMapping> peer_heaps_;
  std::vector<uintptr_t> peer_heap_addresses_;
  uint64_t probe_word_ = 0; // peers read it to learn whether they can read this rank
  std::vector<char> scratch_; // two reduction chunks; stream worker only
  // Note [Socket transport]: set when the ranks meet over TCP; region_ is
  // then null, and every collective runs on it.
  std::unique_ptr<SocketTransport> sockets_;
  std::atomic<HcclResult> error_{HCCL_SUCCESS};
  mutable std::mutex abort_mutex_;
  std::string abort_reason_; // guarded by abort_mutex_
};

// A new job's root info: a name no other job on this machine uses.
HcclResult generateRootInfo(HcclRootInfo* root, std::string* why);

// The root info every rank of a rank-table job derives alike from the
// table's bytes (HcclCommInitClusterInfo): its communicator is named after them
// and the user, so ranks meet without exchanging anything. Two jobs running
// from identical tables at once would share the name: the second one's rank
// 0 then fails (Note [Shared segments]). With `rendezvous` (a table listing
// several servers), every rank joins over TCP at that server, which rank 0
// runs (Note [Socket transport]).
void rankTableRootInfo(const std::string& table, const SocketAddress* rendezvous,
                       HcclRootInfo* root);

} // namespace npu_sim
