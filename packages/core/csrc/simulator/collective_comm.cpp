#include "collective_comm.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <type_traits>

#include "bulk_copy.h"
#include "bulk_reduce.h"
#include "collective_reduce.h"
#include "rank_devices.h"
#include "config.h"
#include "device.h"
#include "device_memory.h"
#include "errors.h"
#include "model.h"
#include "peer_memory.h"
#include "runtime.h"
#include "shared_segment.h"
#include "socket_transport.h"
#include "util.h"

namespace npu_sim {

namespace {

constexpr uint32_t kMaxRanks = 1024;
constexpr char kRootMagic[] = "npu-sim-hccl/1";
// HCCL's default CCL buffer is 200 MiB per rank; the simulator's buffers
// are host shared memory, so it defaults to less. HCCL_BUFFSIZE (MiB)
// overrides both.
constexpr uint64_t kDefaultSlotMiB = 16;
// HCCL's documented defaults, in seconds.
constexpr double kDefaultConnectTimeout = 120;
constexpr double kDefaultExecTimeout = 1836;
// A direct reduction combines this many bytes of every rank at a time, in
// buffers that stay in the cache (Note [Direct collectives]).
constexpr size_t kReduceChunkBytes = 128 << 10;

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && x < y + b_bytes && y < x + a_bytes;
}
// How long a rank spins at a meeting point before it sleeps (Note [Meeting
// waits when ranks outnumber CPUs]).
constexpr std::chrono::nanoseconds kMeetingSpin{50'000};

// Note [Meeting waits when ranks outnumber CPUs]
// A rank at a meeting spins kMeetingSpin, yielding its CPU every few
// microseconds (Note [Spinning yields], util.h), then sleeps on the futex.
// With more ranks than CPUs one would expect sleeping at once to serve the
// peers better. Measured with 4 ranks on the 2-CPU development VM, shared
// with other jobs (load 6-12), timing 40 collectives of 4 MiB against 40
// npu copies of 4 MiB on every rank at once (median of 5 trials; hccl bus
// bandwidth / copy bandwidth, as benchmarks/collectives.py), three
// interleaved pairs: sleeping at once gave all-reduce 0.32-0.46 where this
// spin gave 0.62-1.06, and all-gather 0.15-0.29 against 0.20-0.67. A
// pause-only spin of 5 us then the futex was no better (all-gather 0.23,
// 0.38), nor were yielding spins of 0.5 and 3 ms (all-gather 0.08-0.26).
// A woken rank queues for a CPU behind every runnable task of the machine,
// where a yielding one stays runnable. The time is not the ranks' work:
// 200 such all-gathers took rank 0 0.40 s, its threads 99 ms on a CPU
// (/proc/<pid>/task/*/schedstat); the rest the ranks waited for each other
// at the meetings (two per all-gather, three per all-reduce), every one of
// which waits for the rank the scheduler last took off a CPU. So the spin
// stays; what these runs vary with is the machine's load.

struct RootPayload {
  char magic[sizeof(kRootMagic)];
  char region[96];   // the communicator's name (Note [Shared segments])
  char machine[160]; // machineIdentity() of the rank that made it
  // Its process's rendezvous server (port 0: none, as for a rank table's):
  // Note [Socket transport] (socket_transport.cpp).
  SocketAddress rendezvous;
  // Every rank joins over TCP at once (a rank table listing several
  // servers: Note [Socket transport]).
  uint32_t spans_machines;
};
static_assert(sizeof(RootPayload) <= HCCL_ROOT_INFO_BYTES);

// Note [One machine]: the simulator's HCCL joins the ranks of one machine
// through a POSIX shared-memory segment, which only works when every rank
// of a communicator runs on the machine whose HcclGetRootInfo named it. The
// root info carries that machine's identity; a rank elsewhere joins over
// TCP instead, and so does the whole job then (Note [Socket transport],
// socket_transport.cpp). A root info without a rendezvous address (a rank
// table's) still needs one machine: a rank elsewhere fails at once, saying
// so, instead of waiting HCCL_CONNECT_TIMEOUT for a segment it can never
// open. NPU_SIM_HOST_ID replaces the identity (to run a job that spans
// machines on one machine, each process claiming its own).
std::string machineIdentity() {
  if (const char* id = std::getenv("NPU_SIM_HOST_ID"); id != nullptr && *id != '\0') {
    return id;
  }
  // The kernel's boot id tells machines (and containers' hosts) apart; the
  // host name makes the message readable.
  char host[65] = {};
  gethostname(host, sizeof host - 1);
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return std::string(host) + " (boot id " + (boot_id.empty() ? "unknown" : boot_id) + ")";
}

// The identity as the payload holds it (truncated to fit, NUL-terminated).
void storeMachine(char (&out)[sizeof RootPayload::machine]) {
  std::snprintf(out, sizeof out, "%s", machineIdentity().c_str());
}

// The message of a point-to-point exchange that waits for a peer inside a
// collective (Note [Point-to-point meets a collective]).
struct BlockedMessage {
  uint32_t messages = 0; // of the exchange: 1 for HcclSend/HcclRecv
  uint32_t send = 0;     // 1: a send to `peer`; 0: a receive from it
  uint32_t peer = 0;
  HcclDataType type = HCCL_DATA_TYPE_RESERVED;
  uint64_t count = 0;
};

struct alignas(64) RankState {
  std::atomic<uint64_t> reached; // meeting points this rank has reached
  std::atomic<int32_t> pid;      // 0 until the rank attached
  // Its device's physical id, set before it first meets the others (Note
  // [One device per rank of a machine]).
  std::atomic<int32_t> physical_device;
  // The descriptors of this rank's collectives, by the parity of their
  // sequence numbers (Note [Collective descriptors]).
  alignas(64) CollectiveDescriptor posted[2];
  // Note [Direct collectives]: where this rank's probe word is in its
  // process and what it holds; whether this rank can read every peer (0:
  // not known yet, 1: yes, 2: no); the host addresses of the send and
  // receive buffers of its collectives, by parity as `posted`.
  // reads_peers: the best transport this rank can use with every peer
  // (0: not known yet, else a Transport). heap_*: this rank's device heap
  // (a memfd shared in full: Note [Device heap kind]) that peers may map:
  // its descriptor and inode in this rank's process, its size, and the
  // host address of its offset 0 there; heap_fd is -1 when the heap is
  // private memory that no peer can map.
  alignas(64) std::atomic<uint64_t> probe_address;
  std::atomic<uint64_t> probe_value;
  std::atomic<uint32_t> reads_peers;
  std::atomic<int32_t> heap_fd;
  std::atomic<uint64_t> heap_inode;
  std::atomic<uint64_t> heap_bytes;
  std::atomic<uint64_t> heap_address;
  alignas(64) uint64_t buffers[2][2];
  // Written once, by this rank, before it reports the mismatch.
  BlockedMessage blocked;
};
static_assert(std::is_trivially_copyable_v<BlockedMessage>);
static_assert(std::is_trivially_copyable_v<CollectiveDescriptor>);

using Clock = std::chrono::steady_clock;

double envSeconds(const char* name, double fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return fallback;
  }
  char* end = nullptr;
  const double seconds = std::strtod(value, &end);
  if (end == value || *end != '\0' || !(seconds > 0)) {
    std::fprintf(stderr, "npu simulator: %s=%s is not a positive number of seconds; using %g\n",
                 name, value, fallback);
    return fallback;
  }
  return seconds;
}

// NPU_SIM_HCCL_TRANSPORT: the best transport this rank may use (Note
// [Direct collectives]): "mapped" (the default) maps the peers' device
// memory where their heaps are shared and the kernel allows it, "direct"
// reads the peers' buffers with cross-memory attach only, "staging" always
// moves data through the transfer buffers.
Transport wantedTransport() {
  const char* value = std::getenv("NPU_SIM_HCCL_TRANSPORT");
  if (value == nullptr || *value == '\0' || std::strcmp(value, "mapped") == 0) {
    return Transport::kMapped;
  }
  if (std::strcmp(value, "direct") == 0) {
    return Transport::kCrossMemory;
  }
  if (std::strcmp(value, "staging") == 0) {
    return Transport::kStaging;
  }
  std::fprintf(stderr, "npu simulator: NPU_SIM_HCCL_TRANSPORT=%s is not mapped, direct or "
               "staging; using mapped\n", value);
  return Transport::kMapped;
}

uint64_t slotBytesFromEnv() {
  const char* value = std::getenv("HCCL_BUFFSIZE");
  uint64_t mib = kDefaultSlotMiB;
  if (value != nullptr && *value != '\0') {
    char* end = nullptr;
    const unsigned long long parsed = std::strtoull(value, &end, 10);
    if (end == value || *end != '\0' || parsed == 0 || parsed > 65536) {
      std::fprintf(stderr, "npu simulator: HCCL_BUFFSIZE=%s is not a size in MiB (1-65536); "
                   "using %llu\n", value, static_cast<unsigned long long>(kDefaultSlotMiB));
    } else {
      mib = parsed;
    }
  }
  return mib << 20;
}

long futexWait(std::atomic<uint32_t>* word, uint32_t expected, long timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1000000000L), timeout_ns % 1000000000L};
  // Not FUTEX_PRIVATE_FLAG: the word is shared between processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts,
                 nullptr, 0);
}

void futexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// False once `pid` has exited (gone, or a zombie nobody reaped yet).
bool processAlive(int32_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) {
    return false;
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) {
    return true; // no procfs: trust kill()
  }
  const auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() || text[close + 2] != 'Z';
}

std::string rankList(const std::vector<uint32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) {
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  if (ranks.size() > 16) {
    out += ", ... (" + std::to_string(ranks.size()) + " ranks)";
  }
  return out;
}

// The names PyTorch gives these types, which users know.
const char* typeName(HcclDataType type) {
  switch (type) {
    case HCCL_DATA_TYPE_INT8: return "int8";
    case HCCL_DATA_TYPE_INT16: return "int16";
    case HCCL_DATA_TYPE_INT32: return "int32";
    case HCCL_DATA_TYPE_FP16: return "float16";
    case HCCL_DATA_TYPE_FP32: return "float32";
    case HCCL_DATA_TYPE_INT64: return "int64";
    case HCCL_DATA_TYPE_UINT64: return "uint64";
    case HCCL_DATA_TYPE_UINT8: return "uint8";
    case HCCL_DATA_TYPE_UINT16: return "uint16";
    case HCCL_DATA_TYPE_UINT32: return "uint32";
    case HCCL_DATA_TYPE_FP64: return "float64";
    case HCCL_DATA_TYPE_BFP16: return "bfloat16";
    default: return hcclDataTypeName(type);
  }
}

const char* opName(HcclReduceOp op) {
  switch (op) {
    case HCCL_REDUCE_SUM: return "sum";
    case HCCL_REDUCE_PROD: return "prod";
    case HCCL_REDUCE_MAX: return "max";
    case HCCL_REDUCE_MIN: return "min";
    default: return hcclReduceOpName(op);
  }
}

const char* apiName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "HcclAllReduce";
    case CollectiveKind::kReduce: return "HcclReduce";
    case CollectiveKind::kBroadcast: return "HcclBroadcast";
    case CollectiveKind::kAllGather: return "HcclAllGather";
    case CollectiveKind::kReduceScatter: return "HcclReduceScatter";
    case CollectiveKind::kBarrier: return "HcclBarrier";
    case CollectiveKind::kAllToAll: return "HcclAlltoAll";
    case CollectiveKind::kAllToAllV: return "HcclAlltoAllV";
  }
  return "an unknown collective";
}

bool isAllToAll(CollectiveKind kind) {
  return kind == CollectiveKind::kAllToAll || kind == CollectiveKind::kAllToAllV;
}

std::string formatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

} // namespace

bool collectivesAgree(const CollectiveDescriptor& a, const CollectiveDescriptor& b) {
  const bool same_kind = a.kind == b.kind || (isAllToAll(a.kind) && isAllToAll(b.kind));
  return same_kind && a.type == b.type && a.op == b.op && a.root == b.root &&
      a.count == b.count && a.sequence == b.sequence;
}

std::string describe(const CollectiveDescriptor& d) {
  std::string out = apiName(d.kind);
  out += "(";
  std::string sep;
  if (d.kind != CollectiveKind::kBarrier && !isAllToAll(d.kind)) {
    out += "count=" + std::to_string(d.count);
    sep = ", ";
  }
  if (d.kind != CollectiveKind::kBarrier) {
    out += sep + typeName(d.type);
    sep = ", ";
  }
  if (d.op != HCCL_REDUCE_RESERVED) {
    out += sep + opName(d.op);
  }
  if (d.root != CollectiveDescriptor::kNoRoot) {
    out += sep + "root=" + std::to_string(d.root);
  }
  return out + ")";
}

struct CommRegion {
  std::atomic<uint32_t> ranks;       // nRanks, set by rank 0
  std::atomic<uint64_t> slot_bytes;  // every rank's buffer size, set by rank 0
  std::atomic<uint32_t> failed_rank; // 1 + the first rank whose collective failed
  std::atomic<uint32_t> failed_code; // its HcclResult
  // Note [Point-to-point meets a collective]: (collective rank + 1) << 16 |
  // (point-to-point rank + 1), and the collective's sequence number.
  std::atomic<uint64_t> mismatch_sequence;
  std::atomic<uint32_t> mismatch_ranks;
  // Note [Socket transport]: set by rank 0 when a rank of another machine
  // registered with the rendezvous server; every rank then joins over TCP.
  std::atomic<uint32_t> sockets;
  alignas(64) std::atomic<uint32_t> bell; // bumped at every arrival; the futex word
  std::atomic<uint32_t> sleepers;         // ranks waiting on `bell`
  RankState rank[kMaxRanks];
};

// Note [Point-to-point channels]
// Messages from rank s to rank d go through channels_[s * size + d], in the
// shared region: `posted` counts the chunks s has put into its buffer for d,
// `taken` the chunks d has copied out of it. A rank's buffer holds one chunk
// of one message at a time: s puts a chunk only once every chunk it put
// before (for anyone) was taken, so a finished exchange also leaves the
// buffer free for the next collective. Each chunk carries its message's
// byte count and type, which the receiver checks against its own. The
// counters only grow over the communicator's life, so a message needs no
// setup; an empty message is one empty chunk, so that its size is checked too.
struct Channel {
  std::atomic<uint64_t> posted;
  std::atomic<uint64_t> taken;
  std::atomic<uint64_t> message_bytes; // of the message the last posted chunk belongs to
  std::atomic<uint32_t> message_type;  // its HcclDataType
  uint32_t unused;
};

namespace {
constexpr size_t kPage = 4096;
constexpr size_t kHeaderBytes = (sizeof(CommRegion) + kPage - 1) & ~(kPage - 1);

size_t channelBytes(uint32_t nRanks) {
  const size_t bytes = sizeof(Channel) * nRanks * nRanks;
  return (bytes + kPage - 1) & ~(kPage - 1);
}

// Note [Small all-reduces meet once]
// An all-reduce (or reduce) of at most kSmallBytes takes one meeting
// instead of three: each rank puts its input in its small buffer of the
// collective's parity (sequence % 2), the ranks meet (and check that all run
// the same collective), and every rank that receives the result combines
// all the inputs itself, in rank order, into its output. The result is
// bit-identical on every rank and to the large path's, which combines in
// the same order. Two buffers per rank suffice, for the reason two
// descriptor slots do (Note [Collective descriptors]): a rank writes the
// buffer of collective n + 2 only after the first meeting of collective
// n + 1, which every other rank reaches only after it has read collective
// n's. The large path's transfer buffers are separate, so a small
// collective never overwrites data a large one is still reading.
constexpr size_t kSmallBytes = 16 << 10;

size_t smallBufferBytes(uint32_t nRanks) {
  return 2 * kSmallBytes * nRanks; // a multiple of the page size
}
} // namespace

HcclResult generateRootInfo(HcclRootInfo* root, std::string* why) {
  static std::atomic<uint64_t> counter{0};
  std::random_device entropy;
  const uint64_t nonce = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
  RootPayload payload{};
  std::memcpy(payload.magic, kRootMagic, sizeof kRootMagic);
  std::snprintf(payload.region, sizeof payload.region, "/npu-sim-hccl-%d-%llu-%016llx",
                static_cast<int>(getpid()),
                static_cast<unsigned long long>(counter.fetch_add(1)),
                static_cast<unsigned long long>(nonce));
  storeMachine(payload.machine);
  // Note [Socket transport]: without a server (no TCP here), the job must
  // stay on this machine (Note [One machine]).
  std::string unused;
  if (rendezvousServer(&payload.rendezvous, &unused) != HCCL_SUCCESS) {
    payload.rendezvous = SocketAddress{};
  }
  std::memset(root->internal, 0, sizeof root->internal);
  std::memcpy(root->internal, &payload, sizeof payload);
  return HCCL_SUCCESS;
}

void rankTableRootInfo(const std::string& table, const SocketAddress* rendezvous,
                       HcclRootInfo* root) {
  // FNV-1a: a name, not a secret (only this user's processes are handed the
  // segment: Note [Shared segments]).
  uint64_t hash = 1469598103934665603ULL;
  for (const unsigned char c : table) {
    hash = (hash ^ c) * 1099511628211ULL;
  }
  RootPayload payload{};
  std::memcpy(payload.magic, kRootMagic, sizeof kRootMagic);
  std::snprintf(payload.region, sizeof payload.region, "/npu-sim-hccl-table-%u-%016llx",
                static_cast<unsigned>(getuid()), static_cast<unsigned long long>(hash));
  storeMachine(payload.machine);
  if (rendezvous != nullptr) {
    payload.rendezvous = *rendezvous;
    payload.spans_machines = 1;
  }
  std::memset(root->internal, 0, sizeof root->internal);
  std::memcpy(root->internal, &payload, sizeof payload);
}

Communicator::Communicator(std::string name, uint32_t size, uint32_t rank, uint32_t device,
                           double exec_timeout, std::string exec_timeout_origin)
    : name_(std::move(name)), size_(size), rank_(rank), device_(device),
      exec_timeout_(exec_timeout), exec_timeout_origin_(std::move(exec_timeout_origin)) {
  all_ranks_.reserve(size_);
  for (uint32_t r = 0; r < size_; ++r) {
    all_ranks_.push_back(r);
  }
}

Communicator::~Communicator() {
  if (region_ != nullptr) {
    munmap(region_, region_bytes_);
  }
}

namespace {

// A communicator's settings: from its config where set, else from the
// environment, else HCCL's defaults.
struct CommSettings {
  uint64_t slot_bytes;
  double exec_timeout; // infinity: no limit
  std::string exec_timeout_origin;
};

HcclResult readSettings(const HcclCommConfig* config, CommSettings* out, std::string* why) {
  out->slot_bytes = slotBytesFromEnv();
  const char* env = std::getenv("HCCL_EXEC_TIMEOUT");
  out->exec_timeout = envSeconds("HCCL_EXEC_TIMEOUT", kDefaultExecTimeout);
  out->exec_timeout_origin = env != nullptr && *env != '\0'
      ? "HCCL_EXEC_TIMEOUT"
      : "HCCL_EXEC_TIMEOUT's default (" + formatSeconds(kDefaultExecTimeout) + " s)";
  if (config == nullptr) {
    return HCCL_SUCCESS;
  }
  HcclCommConfigHeader header;
  std::memcpy(&header, config->reserved, sizeof header);
  if (header.magicWord != HCCL_COMM_CONFIG_MAGIC_WORD || header.size < sizeof(header)) {
    *why = "config was not initialised (its header is not HCCL's; start from HCCL's "
           "HcclCommConfigInit or torch-npu's c10_npu::hccl::default_comm_config())";
    return HCCL_E_PARA;
  }
  // Only the fields the caller's struct has (an older HCCL's may be shorter).
  auto has = [&](size_t offset, size_t bytes) { return header.size >= offset + bytes; };
  if (has(offsetof(HcclCommConfig, hcclBufferSize), sizeof config->hcclBufferSize) &&
      config->hcclBufferSize != HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET) {
    if (config->hcclBufferSize == 0 || config->hcclBufferSize > 65536) {
      *why = "config.hcclBufferSize " + std::to_string(config->hcclBufferSize) +
          " is not a size in MiB (1-65536)";
      return HCCL_E_PARA;
    }
    out->slot_bytes = static_cast<uint64_t>(config->hcclBufferSize) << 20;
  }
  if (has(offsetof(HcclCommConfig, hcclExecTimeOut), sizeof config->hcclExecTimeOut) &&
      config->hcclExecTimeOut >= 0) {
    // 0: no limit, as on HCCL of Atlas A2/A3.
    out->exec_timeout = config->hcclExecTimeOut == 0
        ? std::numeric_limits<double>::infinity()
        : static_cast<double>(config->hcclExecTimeOut);
    out->exec_timeout_origin = "the communicator's hcclExecTimeOut (torch.distributed: the "
                               "process group's timeout)";
  }
  return HCCL_SUCCESS;
}

} // namespace

// Note [Shared segments] (shared_segment.cpp): how the ranks come to map one
// segment that never has a name, so that no death leaves it behind.
HcclResult Communicator::create(const HcclRootInfo& root, uint32_t nRanks, uint32_t rank,
                                uint32_t device, int32_t physical_device,
                                const HcclCommConfig* config,
                                std::shared_ptr<Communicator>* out, std::string* why) {
  RootPayload payload;
  std::memcpy(&payload, root.internal, sizeof payload);
  if (std::memcmp(payload.magic, kRootMagic, sizeof kRootMagic) != 0 ||
      payload.region[0] != '/' || std::memchr(payload.region, '\0', sizeof payload.region) == nullptr) {
    *why = "the root info was not made by HcclGetRootInfo of the NPU simulator (every rank must "
           "use the same root info, made by one rank)";
    return HCCL_E_PARA;
  }
  // Note [One machine].
  char here[sizeof payload.machine];
  storeMachine(here);
  const bool on_root_machine =
      std::memchr(payload.machine, '\0', sizeof payload.machine) != nullptr &&
      std::strcmp(payload.machine, here) == 0;
  const bool has_rendezvous = payload.rendezvous.port != 0 &&
      std::memchr(payload.rendezvous.ip, '\0', sizeof payload.rendezvous.ip) != nullptr;
  if (!on_root_machine && !has_rendezvous) {
    *why = "rank " + std::to_string(rank) + " runs on " + here +
        ", but the communicator's ranks meet on " +
        std::string(payload.machine, strnlen(payload.machine, sizeof payload.machine)) +
        ": without a root info from HcclGetRootInfo (a rank table's communicator) the NPU "
        "simulator's HCCL joins the ranks of one machine only, through shared memory, so "
        "every rank must run there; use HcclCommInitRootInfo to span machines";
    return HCCL_E_NOT_SUPPORT;
  }
  if (nRanks == 0 || nRanks > kMaxRanks) {
    *why = "nRanks " + std::to_string(nRanks) + " is outside 1.." + std::to_string(kMaxRanks);
    return HCCL_E_PARA;
  }
  if (rank >= nRanks) {
    *why = "rank " + std::to_string(rank) + " is not below nRanks " + std::to_string(nRanks);
    return HCCL_E_PARA;
  }
  CommSettings settings;
  if (HcclResult r = readSettings(config, &settings, why); r != HCCL_SUCCESS) {
    return r;
  }
  auto makeCommunicator = [&] {
    return std::shared_ptr<Communicator>(new Communicator(payload.region, nRanks, rank, device,
                                                          settings.exec_timeout,
                                                          settings.exec_timeout_origin));
  };
  const double connect_timeout = envSeconds("HCCL_CONNECT_TIMEOUT", kDefaultConnectTimeout);
  // Note [Socket transport]: a rank of another machine than the root info's
  // joins over TCP at once.
  auto joinOverSockets = [&](double timeout) -> HcclResult {
    std::unique_ptr<SocketTransport> sockets;
    const HcclResult r = SocketTransport::connect(
        payload.region, payload.rendezvous, nRanks, rank, here, physical_device,
        SocketTransport::Settings{timeout, settings.exec_timeout, settings.exec_timeout_origin},
        &sockets, why);
    if (r != HCCL_SUCCESS) {
      return r;
    }
    std::shared_ptr<Communicator> comm = makeCommunicator();
    comm->sockets_ = std::move(sockets);
    if (const char* log = std::getenv("NPU_SIM_HCCL_LOG"); log != nullptr && *log == '1') {
      std::fprintf(stderr, "npu simulator: HCCL rank %u of %u joined %s over the socket "
                   "transport (%u machines)\n", rank, nRanks, payload.region,
                   comm->sockets_->machines());
    }
    *out = std::move(comm);
    return HCCL_SUCCESS;
  };
  if (!on_root_machine || payload.spans_machines != 0) {
    return joinOverSockets(connect_timeout);
  }
  std::shared_ptr<Communicator> comm = makeCommunicator();
  const uint64_t slot_bytes = settings.slot_bytes;
  const size_t total =
      kHeaderBytes + channelBytes(nRanks) + smallBufferBytes(nRanks) +
      static_cast<size_t>(slot_bytes) * nRanks;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(connect_timeout));
  // Note [Shared segments]: rank 0 makes the segment and hands it out, the
  // others ask it for it.
  std::unique_ptr<SegmentHost> host;
  int fd = -1;
  if (rank == 0) {
    if (HcclResult r = SegmentHost::create(comm->name_, &host, why); r != HCCL_SUCCESS) {
      return r;
    }
    // Allocated now rather than at first touch: a full /dev/shm (64 MiB in a
    // default Docker container) is an error here instead of a SIGBUS inside
    // a collective.
    if (const int error = posix_fallocate(host->fd(), 0, static_cast<off_t>(total)); error != 0) {
      *why = "no room in /dev/shm for the " + std::to_string(total >> 20) +
          " MiB of transfer buffers (" + std::strerror(error) +
          "): lower HCCL_BUFFSIZE (MiB per rank) or enlarge /dev/shm (docker run --shm-size)";
      return HCCL_E_MEMORY;
    }
    fd = host->fd();
  } else {
    switch (joinSegment(comm->name_, deadline, &fd, why)) {
      case JoinOutcome::kJoined:
        break;
      case JoinOutcome::kTimedOut:
        *why = "joining the communicator timed out after " + formatSeconds(connect_timeout) +
            " s waiting for rank 0 to create its shared segment " + comm->name_ +
            ". The limit is HCCL_CONNECT_TIMEOUT seconds";
        return HCCL_E_TIMEOUT;
      case JoinOutcome::kFailed:
        return HCCL_E_PARA;
    }
    struct stat st{};
    const int stat_result = fstat(fd, &st);
    const int stat_error = errno;
    if (stat_result != 0 || static_cast<size_t>(st.st_size) != total) {
      close(fd);
      *why = stat_result != 0
          ? "fstat of the shared segment failed: " + std::string(std::strerror(stat_error))
          : "the ranks disagree on nRanks or the buffer size (HCCL_BUFFSIZE or "
            "hcclBufferSize): the shared segment has " + std::to_string(st.st_size) +
            " bytes, this rank expects " + std::to_string(total);
      return stat_result != 0 ? HCCL_E_SYSCALL : HCCL_E_PARA;
    }
  }
  void* mapped = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_error = errno;
  if (rank != 0) {
    close(fd); // rank 0's belongs to `host`
  }
  if (mapped == MAP_FAILED) {
    *why = "mmap of the shared segment failed: " + std::string(std::strerror(map_error));
    return HCCL_E_SYSCALL;
  }
  comm->region_ = static_cast<CommRegion*>(mapped);
  comm->region_bytes_ = total;
  comm->slot_bytes_ = slot_bytes;
  comm->channels_ = reinterpret_cast<Channel*>(static_cast<char*>(mapped) + kHeaderBytes);
  comm->small_ = static_cast<char*>(mapped) + kHeaderBytes + channelBytes(nRanks);
  comm->slots_ = comm->small_ + smallBufferBytes(nRanks);
  CommRegion& region = *comm->region_;

  if (rank == 0) {
    // The header is complete before any other rank can map the segment.
    region.ranks.store(nRanks);
    region.slot_bytes.store(slot_bytes);
    region.rank[0].pid.store(static_cast<int32_t>(getpid()));
    host->serve();
  } else {
    if (const uint32_t ranks = region.ranks.load(); ranks != nRanks) {
      *why = "this rank was given nRanks " + std::to_string(nRanks) + ", rank 0 " +
          std::to_string(ranks) + "; every rank must pass the same nRanks";
      return HCCL_E_PARA;
    }
    if (region.slot_bytes.load() != slot_bytes) {
      *why = "the ranks disagree on the buffer size (HCCL_BUFFSIZE or hcclBufferSize); set "
             "the same value for every rank";
      return HCCL_E_PARA;
    }
    int32_t pid = 0;
    if (!region.rank[rank].pid.compare_exchange_strong(pid, static_cast<int32_t>(getpid()))) {
      *why = "rank " + std::to_string(rank) + " has already joined this communicator (process " +
          std::to_string(pid) + "); every process must pass a different rank";
      return HCCL_E_PARA;
    }
  }
  // Note [Direct collectives]: peers read this word when the communicator
  // is complete to learn whether they can read this process.
  std::random_device entropy;
  comm->probe_word_ = ((static_cast<uint64_t>(entropy()) << 32) ^ entropy()) | 1;
  region.rank[rank].probe_value.store(comm->probe_word_);
  region.rank[rank].probe_address.store(reinterpret_cast<uintptr_t>(&comm->probe_word_));
  region.rank[rank].physical_device.store(physical_device);
  comm->publishHeap();
  // Note [Socket transport]: while the ranks of this machine gather, rank 0
  // watches for a rank of another machine at this process's rendezvous
  // server; then all of them join over TCP instead.
  std::function<HcclResult()> switch_to_sockets;
  if (has_rendezvous) {
    switch_to_sockets = [&region, rank, name = comm->name_,
                         machine = std::string(payload.machine), c = comm.get()] {
      if (region.sockets.load() != 0) {
        return HCCL_E_AGAIN;
      }
      if (rank == 0 && rendezvousHeardFromAnotherMachine(name, machine)) {
        region.sockets.store(1);
        c->ring();
        return HCCL_E_AGAIN;
      }
      return HCCL_SUCCESS;
    };
  }
  HcclResult joined = comm->meet(connect_timeout, why, switch_to_sockets);
  if (joined == HCCL_E_AGAIN) {
    // The segment stays served until every rank of this machine has
    // learned from it to join over TCP, which they have once all connected.
    const double left =
        std::chrono::duration<double>(deadline - Clock::now()).count();
    joined = joinOverSockets(std::max(left, 0.001));
    if (host != nullptr) {
      host->stop();
    }
    return joined;
  }
  if (host != nullptr) {
    host->stop(); // every rank has the segment, or the job failed
  }
  if (joined != HCCL_SUCCESS) {
    return joined;
  }
  // Note [One device per rank of a machine]
  std::vector<int32_t> devices(nRanks);
  for (uint32_t r = 0; r < nRanks; ++r) {
    devices[r] = region.rank[r].physical_device.load(std::memory_order_acquire);
  }
  if (HcclResult r = refuseSharedDevices(std::vector<std::string>(nRanks, here), devices, why);
      r != HCCL_SUCCESS) {
    return r;
  }
  if (HcclResult r = comm->chooseTransport(connect_timeout, why); r != HCCL_SUCCESS) {
    return r;
  }
  *out = std::move(comm);
  return HCCL_SUCCESS;
}

char* Communicator::slot(uint32_t r) const {
  return slots_ + static_cast<size_t>(r) * slot_bytes_;
}

Channel& Communicator::channel(uint32_t from, uint32_t to) const {
  return channels_[static_cast<size_t>(from) * size_ + to];
}

void Communicator::ring() {
  region_->bell.fetch_add(1);
  if (region_->sleepers.load() > 0) {
    futexWakeAll(&region_->bell);
  }
}

HcclResult Communicator::failed(HcclResult code, std::string* why) {
  {
    // The reason is in place before anyone can see the error.
    std::lock_guard<std::mutex> lock(abort_mutex_);
    if (error_.load(std::memory_order_relaxed) == HCCL_SUCCESS) {
      abort_reason_ = *why;
      error_.store(code, std::memory_order_release);
    }
  }
  if (sockets_ != nullptr) {
    sockets_->abort(code, *why); // Note [Socket transport]
    return code;
  }
  uint32_t nobody = 0;
  if (region_->failed_rank.compare_exchange_strong(nobody, rank_ + 1)) {
    region_->failed_code.store(static_cast<uint32_t>(code));
  }
  region_->bell.fetch_add(1);
  futexWakeAll(&region_->bell);
  return code;
}

template <typename Run>
HcclResult Communicator::overSockets(Run&& run, std::string* why) {
  if (HcclResult error = checkUsable(why); error != HCCL_SUCCESS) {
    return error;
  }
  const HcclResult result = run();
  return result == HCCL_SUCCESS ? result : failed(result, why);
}

HcclResult Communicator::checkUsable(std::string* why) const {
  const HcclResult error = asyncError();
  if (error != HCCL_SUCCESS) {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    *why = "the communicator was aborted: it failed in an earlier collective (HCCL error " +
        std::to_string(error) + ": " + abort_reason_ + "); destroy it and create a new one";
  }
  return error;
}

std::string Communicator::activity() const {
  if (current_.kind == CollectiveKind{}) {
    return "joining the communicator";
  }
  return describe(current_) + ", collective #" + std::to_string(current_.sequence) +
      " of this communicator";
}

template <typename Ready, typename Late>
HcclResult Communicator::await(Ready&& ready, const std::vector<uint32_t>& watched,
                               double timeout_seconds, Late&& late, std::string* why) {
  return await(std::forward<Ready>(ready), watched, timeout_seconds, std::forward<Late>(late),
               [] { return HCCL_SUCCESS; }, why);
}

template <typename Ready, typename Late, typename Stuck>
HcclResult Communicator::await(Ready&& ready, const std::vector<uint32_t>& watched,
                               double timeout_seconds, Late&& late, Stuck&& stuck,
                               std::string* why) {
  CommRegion& region = *region_;
  // Note [Collective wait times]
  const auto entered = timing_waits_ ? Clock::now() : Clock::time_point{};
  auto arrived = [&] {
    if (timing_waits_) {
      const int64_t waited =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - entered).count();
      waits_.wait_ns += waited;
      if (!waited_) {
        waits_.sync_ns = waited;
        waited_ = true;
      }
    }
    return HCCL_SUCCESS;
  };
  // Peers usually arrive within microseconds of each other: spin first (a
  // futex sleep and wake-up costs tens of microseconds on a VM).
  if (spinUntil(ready, kMeetingSpin)) {
    return arrived();
  }
  const auto start = Clock::now();
  const auto deadline = std::isinf(timeout_seconds)
      ? Clock::time_point::max()
      : start + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(timeout_seconds));
  auto next_liveness_check = start;
  for (;;) {
    const uint32_t bell = region.bell.load();
    if (ready()) {
      return arrived();
    }
    if (HcclResult error = checkNoRankFailed(why); error != HCCL_SUCCESS) {
      return error;
    }
    if (HcclResult error = stuck(); error != HCCL_SUCCESS) {
      return error;
    }
    if (processExiting()) {
      *why = "the process is exiting";
      return failed(HCCL_E_INTERNAL, why);
    }
    const auto now = Clock::now();
    if (now >= next_liveness_check) {
      next_liveness_check = now + std::chrono::milliseconds(100);
      for (const uint32_t r : watched) {
        const int32_t pid = region.rank[r].pid.load();
        if (r != rank_ && pid != 0 && !processAlive(pid)) {
          *why = "rank " + std::to_string(r) + " (process " + std::to_string(pid) +
              ") exited before the collective completed";
          return failed(HCCL_E_REMOTE, why);
        }
      }
    }
    if (now >= deadline) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout_seconds);
      *why = late(std::string(seconds));
      return failed(HCCL_E_TIMEOUT, why);
    }
    region.sleepers.fetch_add(1);
    futexWait(&region.bell, bell, 20'000'000);
    region.sleepers.fetch_sub(1);
  }
}

HcclResult Communicator::checkNoRankFailed(std::string* why) {
  CommRegion& region = *region_;
  if (const uint32_t culprit = region.failed_rank.load(); culprit != 0) {
    // Note [Point-to-point meets a collective]: every rank reports the
    // mismatch as the rank that found it does.
    if (const uint32_t pair = region.mismatch_ranks.load(); pair != 0 &&
        (pair & 0xFFFF) == culprit) {
      *why = pointToPointMismatch((pair >> 16) - 1, (pair & 0xFFFF) - 1,
                                  region.mismatch_sequence.load());
      return failed(HCCL_E_PARA, why);
    }
    *why = "rank " + std::to_string(culprit - 1) + " of the communicator failed (HCCL error " +
        std::to_string(region.failed_code.load()) + "), so rank " + std::to_string(rank_) +
        " cannot complete the collective; see rank " + std::to_string(culprit - 1) +
        "'s error for the cause";
    return failed(HCCL_E_REMOTE, why);
  }
  return HCCL_SUCCESS;
}

HcclResult Communicator::meet(double timeout_seconds, std::string* why,
                              const std::function<HcclResult()>& stuck) {
  CommRegion& region = *region_;
  const uint64_t target = ++meetings_;
  region.rank[rank_].reached.store(target);
  ring();
  auto missing = [&](std::vector<uint32_t>* out) {
    bool any = false;
    for (uint32_t r = 0; r < size_; ++r) {
      if (region.rank[r].reached.load(std::memory_order_acquire) < target) {
        if (out == nullptr) {
          return true;
        }
        out->push_back(r);
        any = true;
      }
    }
    return any;
  };
  return await(
      [&] { return !missing(nullptr); }, all_ranks_, timeout_seconds,
      [&](const std::string& seconds) {
        std::vector<uint32_t> late;
        missing(&late);
        const bool joining = current_.kind == CollectiveKind{};
        return activity() + " timed out after " + seconds + " s waiting for rank(s) " +
            rankList(late) + " (rank " + std::to_string(rank_) + " of " +
            std::to_string(size_) + "), which did not arrive" +
            (joining ? ". The limit is HCCL_CONNECT_TIMEOUT seconds"
                     : ": every rank must call the same collectives in the same order. The "
                       "limit is " + exec_timeout_origin_);
      },
      [&] { return stuck ? stuck() : HCCL_SUCCESS; }, why);
}

// Note [Collective descriptors]
// A collective's descriptor (kind, element count, type, reduce op, root and
// sequence number) goes into rank_state.posted[sequence % 2] before the
// rank reaches the collective's first meeting; after that meeting every
// rank compares all ranks' descriptors with rank 0's, and on a mismatch
// every rank fails with the same message, naming rank 0's side and the
// first rank that differs, and the communicator is aborted. Until then a
// rank has only written its own transfer buffer, so no output is touched.
// Two slots suffice: a rank publishes collective n + 2 only after the first
// meeting of collective n + 1, which every other rank reaches only after it
// has read the descriptors of collective n. Without this check, ranks that
// call different collectives (or the same with another size, type, op or
// root) would meet at different phases of their own algorithms, combine
// each other's buffers wrongly, and leave the meeting counters of every
// later collective out of step. All-to-all descriptors carry no counts: the
// per-pair counts are checked apart (allToAllV).
HcclResult Communicator::begin(CollectiveDescriptor what, std::string* why) {
  if (HcclResult error = checkUsable(why); error != HCCL_SUCCESS) {
    return error;
  }
  what.sequence = current_.sequence + 1;
  current_ = what;
  checked_ = false;
  region_->rank[rank_].posted[what.sequence % 2] = what;
  return HCCL_SUCCESS;
}

HcclResult Communicator::checkAgreement(std::string* why) {
  checked_ = true;
  const uint64_t parity = current_.sequence % 2;
  const CollectiveDescriptor first = region_->rank[0].posted[parity];
  for (uint32_t r = 1; r < size_; ++r) {
    const CollectiveDescriptor other = region_->rank[r].posted[parity];
    if (!collectivesAgree(first, other)) {
      *why = "rank 0 called " + describe(first) + " as collective #" +
          std::to_string(first.sequence) + ", rank " + std::to_string(r) + " called " +
          describe(other) + " as collective #" + std::to_string(other.sequence) +
          ": every rank must call the same collectives, with the same count, type, reduce "
          "op and root, in the same order. The communicator is aborted";
      return failed(HCCL_E_PARA, why);
    }
  }
  return HCCL_SUCCESS;
}

template <typename... Phase>
HcclResult Communicator::runCollective(CollectiveDescriptor what, size_t count, size_t chunk,
                                       std::string* why, Phase&&... phases) {
  if (HcclResult error = begin(what, why); error != HCCL_SUCCESS) {
    return error;
  }
  if (count == 0) {
    const HcclResult met = meet(exec_timeout_, why);
    return met == HCCL_SUCCESS ? checkAgreement(why) : met;
  }
  return inChunks(count, chunk, why, std::forward<Phase>(phases)...);
}

template <typename... Phase>
HcclResult Communicator::inChunks(size_t count, size_t chunk, std::string* why,
                                  Phase&&... phases) {
  for (size_t off = 0; off < count; off += chunk) {
    const size_t m = std::min(chunk, count - off);
    HcclResult result = HCCL_SUCCESS;
    // Each phase, then a meeting of all ranks; stop at the first failure.
    auto step = [&](auto& phase) {
      if (result == HCCL_SUCCESS) {
        phase(off, m);
        result = meet(exec_timeout_, why);
        if (result == HCCL_SUCCESS && !checked_) {
          result = checkAgreement(why);
        }
      }
    };
    (step(phases), ...);
    if (result != HCCL_SUCCESS) {
      return result;
    }
  }
  return HCCL_SUCCESS;
}

// Note [Direct collectives]
// The ranks of a communicator are processes of one machine and one user
// (Note [One machine]), so a rank can read a peer's device buffers itself
// instead of the peer copying its data into its transfer buffer and this
// rank copying it out again. Two ways, best first (Transport):
//  - mapped: when a rank's device heap is its memfd mapped MAP_SHARED
//    (Note [Device heap kind], config.cpp: the ranks of a multi-process
//    job, or the checker), each peer maps that whole memfd when the
//    communicator is made (PeerMapping: the peer's descriptor through
//    pidfd_getfd) and reads the rank's buffers through it, with memcpy and
//    the reduction code straight on the mapped pages (no kernel call per
//    read, and reductions take their operands where they are instead of
//    copying them first). Measured with 2 ranks on the same shared heaps
//    (2 CPUs, loaded): all-reduce, reduce-scatter, all-gather and
//    all-to-all took 0.43-0.72 of their cross-memory time at 4, 64 and
//    256 MiB. Addresses outside the peer's heap (aclrtMapMem or imported
//    IPC memory, host memory) are read as below. The mappings go with the
//    communicator.
//  - cross-memory attach (process_vm_readv): one kernel copy from the
//    peer's pages; what is left when a heap is private anonymous memory
//    (huge pages, not reachable from another process).
//
// A direct collective publishes the host addresses of its send and receive
// buffers next to its descriptor (RankState::buffers, by parity as
// `posted`), meets once, checks that every rank runs the same collective
// (Note [Collective descriptors]) and that no rank has failed, and only
// then reads. Through mappings, an all-reduce is one pass in which each
// rank also writes its result into the peers' outputs (Note [All-reduce
// writes every rank's share]); otherwise it is a reduce-scatter then an
// all-gather: rank r
// combines its r-th share of the elements, reading every rank's input of
// that share in rank order into cache-sized chunks (kReduceChunkBytes), so
// the result is bit-identical to the staging path's; the ranks meet; each
// then reads the other shares from their owners' outputs. Reduce-scatter
// is the first half; all-gather, broadcast and all-to-all read straight
// into the output. No rank waits for another per chunk: each reads at its
// own pace, and only the meetings order the phases. An in-place
// all-reduce writes a share of its buffer only after the peers read the
// input there (the middle meeting), and every direct collective ends with
// a meeting, after which no peer reads this rank's buffers any more: the
// stream may then reuse or free them, and the race detector's view (this
// work reads the send buffer and writes the receive buffer while it runs)
// stays true. An output that overlaps this rank's input other than as the
// API's in-place forms lay it out (an in-place reduce-scatter writes the
// first piece of its input, which a peer reads) would be written while the
// peers still read the input: such a rank collects its result in a private
// buffer and copies it out after the last meeting (`deferred` below).
// A peer that dies while this rank reads it makes a cross-memory read
// fail, or makes it miss the next meeting; either way the collective fails
// naming it, as at any meeting (Note [HCCL timeouts]). Through a mapping,
// a dead peer's pages stay readable (the mapping holds them), so the read
// completes and the next meeting, which the dead peer never reaches, fails
// the collective naming it: every phase ends with a meeting. A peer that
// frees a buffer while the collective reads it (a bug of its program)
// makes a cross-memory read fail saying so; through a mapping the freed
// pages read as zeros (the heap punches them out of the memfd) or as the
// data of a new allocation there.
//
// The kernel refuses cross-memory attach and taking another process's
// descriptor where ptrace is restricted (Yama's ptrace_scope, seccomp, a
// peer that made itself non-dumpable). So when a communicator is made,
// every rank reads a probe word of every peer, maps every peer's heap when
// all heaps are shared, and publishes the best transport it could use
// with every peer; the ranks meet once more, and all use the worst of
// these: mapped, else cross-memory attach, else the transfer buffers
// (staging) as before. NPU_SIM_HCCL_TRANSPORT caps a rank's best (mapped,
// the default; direct: cross-memory attach at most; staging), so one rank
// setting it caps the whole communicator. Small all-reduces (Note [Small
// all-reduces meet once]), barriers and point-to-point messages do not
// depend on the choice.
HcclResult Communicator::chooseTransport(double timeout_seconds, std::string* why) {
  CommRegion& region = *region_;
  Transport can = wantedTransport();
  for (uint32_t r = 0; r < size_ && can != Transport::kStaging; ++r) {
    if (r == rank_) {
      continue;
    }
    uint64_t seen = 0;
    std::string error;
    const bool read = readPeerMemory(region.rank[r].pid.load(),
                                     region.rank[r].probe_address.load(), &seen, sizeof seen,
                                     &error) == PeerReadResult::kDone &&
        seen == region.rank[r].probe_value.load();
    can = read ? can : Transport::kStaging;
  }
  if (can == Transport::kMapped && !mapPeerHeaps()) {
    can = Transport::kCrossMemory;
  }
  region.rank[rank_].reads_peers.store(static_cast<uint32_t>(can));
  if (HcclResult r = meet(timeout_seconds, why); r != HCCL_SUCCESS) {
    return r;
  }
  // Every rank takes the worst of the ranks' bests.
  for (uint32_t r = 0; r < size_; ++r) {
    can = std::min(can, static_cast<Transport>(region.rank[r].reads_peers.load()));
  }
  transport_ = can;
  direct_ = can != Transport::kStaging;
  if (can != Transport::kMapped) {
    peer_heaps_.clear();
    peer_heap_addresses_.clear();
  }
  return HCCL_SUCCESS;
}

void Communicator::publishHeap() {
  RankState& mine = region_->rank[rank_];
  mine.heap_fd.store(-1);
  Device& device = Runtime::get().device(device_);
  if (!device.initialized()) {
    return;
  }
  DeviceMemory& memory = device.memory();
  if (!memory.heapShared() && !shareHeapForPeers(device)) {
    return;
  }
  struct stat st {};
  if (fstat(memory.memfd(), &st) != 0) {
    return;
  }
  mine.heap_inode.store(static_cast<uint64_t>(st.st_ino));
  mine.heap_bytes.store(memory.capacity());
  mine.heap_address.store(memory.heapHostBase());
  mine.heap_fd.store(memory.memfd());
}

bool Communicator::shareHeapForPeers(Device& device) {
  // Note [Device heap kind] (config.cpp): a rank no launcher described
  // (torch.multiprocessing.spawn) started with a private heap; joining a
  // communicator of several ranks shows it is one, so its heap becomes
  // shared now, before any peer reads it.
  if (size_ < 2 || config().heap_kind_fixed || wantedTransport() != Transport::kMapped ||
      captureOnDevice(device.id()) != nullptr) {
    return false;
  }
  // The live allocations' pages move: no device work may write them
  // meanwhile (as for an IPC export, Note [IPC memory]).
  if (device.drain("HcclCommInitRootInfo", nullptr) != ACL_SUCCESS ||
      device.memory().shareHeap() != ACL_SUCCESS) {
    std::fprintf(stderr,
                 "[npu_sim] HCCL: device %u's memory stays private (%s); this rank's peers "
                 "read it with cross-memory attach, which is slower.\n",
                 device.id(), takeRecentError());
    return false;
  }
  return true;
}

bool Communicator::mapPeerHeaps() {
  std::vector<PeerMapping> heaps(size_);
  std::vector<uintptr_t> addresses(size_, 0);
  for (uint32_t r = 0; r < size_; ++r) {
    const RankState& peer = region_->rank[r];
    const int32_t fd = peer.heap_fd.load();
    if (fd < 0) {
      return false; // a private heap, here or there: nothing to map
    }
    if (r == rank_) {
      continue;
    }
    std::string error;
    if (!heaps[r].open(peer.pid.load(), fd, peer.heap_inode.load(), peer.heap_bytes.load(),
                       &error)) {
      return false;
    }
    addresses[r] = peer.heap_address.load();
  }
  peer_heaps_ = std::move(heaps);
  peer_heap_addresses_ = std::move(addresses);
  return true;
}

const char* Communicator::peerView(uint32_t r, uintptr_t remote, size_t bytes) const {
  if (transport_ != Transport::kMapped || r == rank_) {
    return nullptr;
  }
  const PeerMapping& heap = peer_heaps_[r];
  const uint64_t offset = remote - peer_heap_addresses_[r]; // wraps below the heap
  if (offset >= heap.size() || bytes > heap.size() - offset) {
    return nullptr;
  }
  return heap.data() + offset;
}

char* Communicator::peerOutput(uint32_t r, uintptr_t remote, size_t bytes) {
  if (peerView(r, remote, bytes) == nullptr) {
    return nullptr;
  }
  return peer_heaps_[r].data() + (remote - peer_heap_addresses_[r]);
}

bool Communicator::buffersInMappedHeaps(size_t bytes) const {
  if (transport_ != Transport::kMapped) {
    return false;
  }
  for (uint32_t r = 0; r < size_; ++r) {
    const RankState& state = region_->rank[r];
    const uint64_t base = state.heap_address.load();
    const uint64_t size = state.heap_bytes.load();
    for (const uintptr_t buffer : {peerSend(r), peerRecv(r)}) {
      const uint64_t offset = buffer - base; // wraps below the heap
      if (buffer == 0 || offset >= size || bytes > size - offset) {
        return false;
      }
    }
  }
  return true;
}

uintptr_t Communicator::peerSend(uint32_t r) const {
  return region_->rank[r].buffers[current_.sequence % 2][0];
}

uintptr_t Communicator::peerRecv(uint32_t r) const {
  return region_->rank[r].buffers[current_.sequence % 2][1];
}

void Communicator::publishBuffers(const void* send, const void* recv) {
  uint64_t* mine = region_->rank[rank_].buffers[current_.sequence % 2];
  mine[0] = reinterpret_cast<uintptr_t>(send);
  mine[1] = reinterpret_cast<uintptr_t>(recv);
}

HcclResult Communicator::beginDirect(CollectiveDescriptor what, const void* send,
                                     const void* recv, std::string* why) {
  if (HcclResult error = begin(what, why); error != HCCL_SUCCESS) {
    return error;
  }
  publishBuffers(send, recv);
  if (HcclResult r = meet(exec_timeout_, why); r != HCCL_SUCCESS) {
    return r;
  }
  if (HcclResult r = checkAgreement(why); r != HCCL_SUCCESS) {
    return r;
  }
  // A rank that gave up waiting here (timeout) may already reuse its
  // buffers: nobody reads them then.
  return checkNoRankFailed(why);
}

HcclResult Communicator::endDirect(std::string* why) {
  if (HcclResult r = meet(exec_timeout_, why); r != HCCL_SUCCESS) {
    return r;
  }
  // A rank that timed out at this meeting did not wait for the slow reader:
  // what that one read may be wrong.
  return checkNoRankFailed(why);
}

HcclResult Communicator::readFrom(uint32_t r, uintptr_t remote, void* local, size_t bytes,
                                  std::string* why, bool bypass_cache) {
  if (bytes == 0) {
    return HCCL_SUCCESS;
  }
  if (r == rank_) {
    const void* from = reinterpret_cast<const void*>(remote);
    if (bypass_cache && !overlap(local, bytes, from, bytes)) {
      copyBypassingCache(local, from, bytes);
    } else if (from != local) {
      std::memmove(local, from, bytes);
    }
    return HCCL_SUCCESS;
  }
  if (const char* view = peerView(r, remote, bytes); view != nullptr) {
    // A peer that exits leaves its pages mapped here: the next meeting,
    // which it does not reach, fails the collective naming it.
    if (bypass_cache) {
      copyBypassingCache(local, view, bytes);
    } else {
      std::memcpy(local, view, bytes);
    }
    return HCCL_SUCCESS;
  }
  const int32_t pid = region_->rank[r].pid.load();
  std::string error;
  const PeerReadResult result = readPeerMemory(pid, remote, local, bytes, &error);
  if (result == PeerReadResult::kDone) {
    return HCCL_SUCCESS;
  }
  if (result == PeerReadResult::kGone || !processAlive(pid)) {
    *why = "rank " + std::to_string(r) + " (process " + std::to_string(pid) +
        ") exited before the collective completed";
    return failed(HCCL_E_REMOTE, why);
  }
  char where[32];
  std::snprintf(where, sizeof where, "%#llx", static_cast<unsigned long long>(remote));
  if (result == PeerReadResult::kRefused) {
    *why = "reading rank " + std::to_string(r) + "'s buffer (process " + std::to_string(pid) +
        ") was refused (" + error + ") although it was allowed when the communicator was "
        "made; set NPU_SIM_HCCL_TRANSPORT=staging to move data through shared memory instead";
    return failed(HCCL_E_SYSCALL, why);
  }
  *why = "rank " + std::to_string(r) + "'s buffer at " + where + " (" + std::to_string(bytes) +
      " bytes) is not mapped in its process (" + error + "): it was freed while the collective "
      "ran";
  return failed(HCCL_E_REMOTE, why);
}

HcclResult Communicator::reduceFrom(const std::vector<uintptr_t>& inputs, char* out,
                                    size_t count, HcclDataType type, HcclReduceOp op,
                                    std::string* why, bool bypass_cache) {
  const size_t esize = hcclElementSize(type);
  const char* own = reinterpret_cast<const char*>(inputs[rank_]);
  const size_t bytes = count * esize;
  if (bypass_cache && size_ > 1 && (out == own || !overlap(out, bytes, own, bytes))) {
    // Note [Bulk reductions bypass the cache] (bulk_reduce.cpp): one pass
    // over every input where it is, when all are mapped here.
    std::vector<const char*> views(size_);
    bool mapped = true;
    for (uint32_t r = 0; r < size_ && mapped; ++r) {
      views[r] = r == rank_ ? own : peerView(r, inputs[r], bytes);
      mapped = views[r] != nullptr;
    }
    if (mapped && reduceBypassingCache(out, views.data(), size_, count, type, op)) {
      return HCCL_SUCCESS;
    }
  }
  // The output accumulates in place unless it overlaps this rank's input,
  // which the partial sums would then overwrite before it is combined.
  // Exactly in place, that happens only after the step that reads it: rank
  // 0's input is the first operand and rank 1's the second of the first
  // step, which combines element for element, so these two ranks reduce in
  // place (the others' shares of the input are not written: the peers
  // read those). Rank 1 took a third longer than rank 0 for its share of a
  // 256 MiB all-reduce going through the accumulator, and rank 0 waited
  // for it at the next meeting.
  const bool in_place = out == own && rank_ <= 1;
  // Below, the output is written with plain stores, also when it is large
  // (Note [Bulk copies bypass the cache], bulk_copy.cpp, measured no gain
  // here); the one pass above is what gains.
  const bool in_output = in_place || !(out < own + bytes && own < out + bytes);
  const size_t chunk = kReduceChunkBytes / esize;
  scratch_.resize(2 * kReduceChunkBytes);
  char* const staged = scratch_.data() + kReduceChunkBytes;
  for (size_t off = 0; off < count; off += chunk) {
    const size_t m = std::min(chunk, count - off);
    const size_t at = off * esize;
    char* acc = in_output ? out + at : scratch_.data();
    // Note [Reductions read this rank's input in place]: this rank's input
    // is an operand where it is, never copied into the accumulator first:
    // rank 0 combines its own chunk with rank 1's into `acc` in one pass
    // (reduceTo) rather than a copy and a reduceInto, which cost it a pass
    // over the data its peers do not make. The operations and their order
    // are the same, so the result is the same bits.
    // A peer's chunk is an operand where it is too when its heap is mapped
    // here (peerView), and is copied to `staged` (or `acc`) otherwise.
    const char* first = own + at; // input 0's chunk, here
    if (rank_ != 0) {
      first = peerView(0, inputs[0] + at, m * esize);
      if (first == nullptr) {
        // In place, `acc` is this rank's input, still to be read: rank 0's
        // chunk lands beside it (`staged`, free again once the first step
        // has read it).
        char* landing = in_place ? staged : acc;
        if (HcclResult r = readFrom(0, inputs[0] + at, landing, m * esize, why);
            r != HCCL_SUCCESS) {
          return r;
        }
        first = landing;
      }
    }
    for (uint32_t r = 1; r < size_; ++r) {
      const char* in = own + at;
      if (r != rank_) {
        in = peerView(r, inputs[r] + at, m * esize);
        if (in == nullptr) {
          if (HcclResult e = readFrom(r, inputs[r] + at, staged, m * esize, why);
              e != HCCL_SUCCESS) {
            return e;
          }
          in = staged;
        }
      }
      reduceTo(acc, r == 1 ? first : acc, in, m, type, op);
    }
    if (size_ == 1 && acc != first) {
      std::memcpy(acc, first, m * esize);
    }
    if (!in_output) {
      std::memcpy(out + at, acc, m * esize);
    }
  }
  return HCCL_SUCCESS;
}

// Note [All-reduce shares reduce in one pass]
// A direct all-reduce's first half is a reduce-scatter, and a share that
// reaches kBypassCacheBytes combines as a large reduce-scatter's piece does
// (Note [Bulk reductions bypass the cache], bulk_reduce.cpp): one pass over
// every rank's input where it is, in rank order, into the same bits. Until
// then the shares took the chunked reduction, which with 4 ranks made a 64
// MiB all-reduce (16 MiB shares) take 81 ms where a 64 MiB reduce-scatter
// took 27 and an all-gather 27 (benchmarks/collectives.py, 2 CPUs, load
// 2-7). In place the pass is safe on every rank, not only ranks 0 and 1 as
// for the chunked reduction: it reads all operands of a line before it
// writes the line, and no peer reads this rank's share of its input.
// Measured, 4 ranks, 64 MiB float32 sum, three interleaved pairs (2 CPUs,
// load 4-6): best of 5 trials 91, 95, 72 ms before, 68, 73, 56 ms after.
HcclResult Communicator::allReduceDirect(const char* send, char* recv, size_t count,
                                         HcclDataType type, HcclReduceOp op, int64_t root,
                                         const CollectiveDescriptor& what, std::string* why) {
  const size_t esize = hcclElementSize(type);
  // An output overlapping the input other than exactly (in place) would
  // overwrite input the peers (or this rank) read later; it is collected
  // apart, and the peers read the shares from there.
  char* const target = recv;
  std::vector<char> deferred;
  if (recv != nullptr && recv != send && overlap(recv, count * esize, send, count * esize)) {
    deferred.resize(count * esize);
    recv = deferred.data();
  }
  auto finish = [&] {
    const HcclResult r = endDirect(why);
    if (r == HCCL_SUCCESS && !deferred.empty()) {
      std::memcpy(target, recv, count * esize);
    }
    return r;
  };
  if (HcclResult error = beginDirect(what, send, recv, why); error != HCCL_SUCCESS) {
    return error;
  }
  // Note [Bulk copies bypass the cache] (bulk_copy.cpp).
  const bool bypass_cache = count * esize >= kBypassCacheBytes;
  std::vector<uintptr_t> inputs(size_);
  if (root >= 0) {
    // HcclReduce: the root combines everything; the others only wait until
    // it has read their inputs.
    if (root == rank_) {
      for (uint32_t r = 0; r < size_; ++r) {
        inputs[r] = peerSend(r);
      }
      if (HcclResult e = reduceFrom(inputs, recv, count, type, op, why); e != HCCL_SUCCESS) {
        return e;
      }
    }
    return finish();
  }
  auto share = [&](uint32_t r) { return std::pair<size_t, size_t>{count * r / size_,
                                                                   count * (r + 1) / size_}; };
  if (buffersInMappedHeaps(count * esize)) {
    // Note [All-reduce writes every rank's share].
    const auto [lo, hi] = share(rank_);
    if (HcclResult e = reduceShareToEveryRank(lo, hi, type, op, why); e != HCCL_SUCCESS) {
      return e;
    }
    return finish();
  }
  // Reduce-scatter: this rank's share, from every rank's input; a large
  // share in one pass, as a reduce-scatter's piece (Note [All-reduce shares
  // reduce in one pass]).
  const auto [lo, hi] = share(rank_);
  for (uint32_t r = 0; r < size_; ++r) {
    inputs[r] = peerSend(r) + lo * esize;
  }
  if (HcclResult e = reduceFrom(inputs, recv + lo * esize, hi - lo, type, op, why,
                                (hi - lo) * esize >= kBypassCacheBytes);
      e != HCCL_SUCCESS) {
    return e;
  }
  // Every share is combined, and nobody reads an input any more.
  if (HcclResult e = meet(exec_timeout_, why); e != HCCL_SUCCESS) {
    return e;
  }
  if (HcclResult e = checkNoRankFailed(why); e != HCCL_SUCCESS) {
    return e;
  }
  // All-gather: the other shares, from their owners' outputs.
  for (uint32_t r = 0; r < size_; ++r) {
    if (r != rank_) {
      const auto [from, to] = share(r);
      if (HcclResult e = readFrom(r, peerRecv(r) + from * esize, recv + from * esize,
                                  (to - from) * esize, why, bypass_cache);
          e != HCCL_SUCCESS) {
        return e;
      }
    }
  }
  return finish();
}

// Note [All-reduce writes every rank's share]
// When every rank's buffers of a direct all-reduce lie in device heaps
// mapped by all (Note [Direct collectives]: the mapped transport, and no
// output collected apart), rank r combines its share r of every rank's
// input, in rank order, and writes the result into share r of every rank's
// output itself, through writable mappings of the peers' heaps, as real
// HCCL writes into its peers' IPC buffers. Nobody else reads or writes
// share r of any buffer meanwhile (an in-place peer's share r of input is
// read by rank r alone, before rank r writes it), so the two meetings that
// open and close every direct collective are all it needs: the
// reduce-scatter and all-gather of the other path need one more between
// them, and the all-gather reads the reduced shares back from memory. Per
// rank a pass reads the input's size and writes the output's (n_out
// stores per combined line, Note [Bulk reductions bypass the cache]); the
// other path reads (2n - 1) / n of the size and writes it once. The bits
// are the same, from the same reduction in the same order. Where the
// one-pass kernel does not apply (8- and 16-bit types, 64-bit integer
// products, outputs of different alignment, small shares) the share is
// reduced into this rank's output as before and copied to the peers'.
HcclResult Communicator::reduceShareToEveryRank(size_t lo, size_t hi, HcclDataType type,
                                                HcclReduceOp op, std::string* why) {
  const size_t esize = hcclElementSize(type);
  const size_t bytes = (hi - lo) * esize;
  if (bytes == 0) {
    return HCCL_SUCCESS;
  }
  std::vector<uintptr_t> inputs(size_);
  std::vector<const char*> views(size_);
  std::vector<void*> outputs(size_);
  for (uint32_t r = 0; r < size_; ++r) {
    inputs[r] = peerSend(r) + lo * esize;
    const uintptr_t output = peerRecv(r) + lo * esize;
    if (r == rank_) {
      views[r] = reinterpret_cast<const char*>(inputs[r]);
      outputs[r] = reinterpret_cast<void*>(output);
    } else {
      views[r] = peerView(r, inputs[r], bytes);
      outputs[r] = peerOutput(r, output, bytes);
    }
  }
  // This rank's output first: the fallback below reduces into it.
  std::swap(outputs[0], outputs[rank_]);
  if (bytes >= kBypassCacheBytes && size_ > 1 &&
      reduceToEachBypassingCache(outputs.data(), size_, views.data(), size_, hi - lo, type, op)) {
    return HCCL_SUCCESS;
  }
  // A chunk at a time, so that the copies read it while it is in the cache.
  char* const own = static_cast<char*>(outputs[0]);
  const size_t chunk = kReduceChunkBytes / esize;
  for (size_t off = 0; off < hi - lo; off += chunk) {
    const size_t m = std::min(chunk, hi - lo - off);
    std::vector<uintptr_t> at(inputs);
    for (uintptr_t& input : at) {
      input += off * esize;
    }
    if (HcclResult e = reduceFrom(at, own + off * esize, m, type, op, why); e != HCCL_SUCCESS) {
      return e;
    }
    for (uint32_t r = 1; r < size_; ++r) {
      char* const to = static_cast<char*>(outputs[r]) + off * esize;
      if (bytes >= kBypassCacheBytes) { // Note [Bulk copies bypass the cache]
        copyBypassingCache(to, own + off * esize, m * esize);
      } else {
        std::memcpy(to, own + off * esize, m * esize);
      }
    }
  }
  return HCCL_SUCCESS;
}

HcclResult Communicator::allReduce(const void* send, void* recv, size_t count, HcclDataType type,
                                   HcclReduceOp op, int64_t root, std::string* why) {
  if (sockets_ != nullptr) {
    return overSockets(
        [&] { return sockets_->allReduce(send, recv, count, type, op, root, why); }, why);
  }
  const size_t esize = hcclElementSize(type);
  const CollectiveDescriptor what{
      root < 0 ? CollectiveKind::kAllReduce : CollectiveKind::kReduce, type, op,
      root < 0 ? CollectiveDescriptor::kNoRoot : static_cast<uint32_t>(root), count};
  if (count > 0 && count * esize <= kSmallBytes) {
    // Note [Small all-reduces meet once].
    if (HcclResult error = begin(what, why); error != HCCL_SUCCESS) {
      return error;
    }
    const size_t bytes = count * esize;
    const size_t parity = current_.sequence % 2;
    auto input = [&](uint32_t r) { return small_ + (2 * r + parity) * kSmallBytes; };
    std::memcpy(input(rank_), send, bytes);
    if (HcclResult r = meet(exec_timeout_, why); r != HCCL_SUCCESS) {
      return r;
    }
    if (HcclResult r = checkAgreement(why); r != HCCL_SUCCESS) {
      return r;
    }
    // A rank that gave up waiting (timeout) left its input behind: the
    // late ones fail too, as at the large path's later meetings.
    if (HcclResult r = checkNoRankFailed(why); r != HCCL_SUCCESS) {
      return r;
    }
    if (root < 0 || root == rank_) {
      std::memcpy(recv, input(0), bytes);
      for (uint32_t r = 1; r < size_; ++r) {
        reduceInto(recv, input(r), count, type, op);
      }
    }
    return HCCL_SUCCESS;
  }
  if (direct_) {
    return allReduceDirect(static_cast<const char*>(send), static_cast<char*>(recv), count, type,
                           op, root, what, why);
  }
  return runCollective(
      what, count, slot_bytes_ / esize, why,
      [&](size_t off, size_t m) {
        std::memcpy(slot(rank_), static_cast<const char*>(send) + off * esize, m * esize);
      },
      [&](size_t, size_t m) {
        // Each rank combines one share of the elements, in rank order, into
        // rank 0's buffer; the shares are disjoint.
        const size_t lo = m * rank_ / size_;
        const size_t hi = m * (rank_ + 1) / size_;
        for (uint32_t r = 1; r < size_ && hi > lo; ++r) {
          reduceInto(slot(0) + lo * esize, slot(r) + lo * esize, hi - lo, type, op);
        }
      },
      [&](size_t off, size_t m) {
        if (root < 0 || root == rank_) {
          std::memcpy(static_cast<char*>(recv) + off * esize, slot(0), m * esize);
        }
      });
}

HcclResult Communicator::broadcast(void* buf, size_t count, HcclDataType type, uint32_t root,
                                   std::string* why) {
  if (sockets_ != nullptr) {
    return overSockets([&] { return sockets_->broadcast(buf, count, type, root, why); }, why);
  }
  const size_t esize = hcclElementSize(type);
  char* data = static_cast<char*>(buf);
  const CollectiveDescriptor what{CollectiveKind::kBroadcast, type, HCCL_REDUCE_RESERVED, root,
                                  count};
  if (direct_) {
    // Note [Direct collectives]: the others read the root's buffer.
    if (HcclResult e = beginDirect(what, data, data, why); e != HCCL_SUCCESS) {
      return e;
    }
    if (rank_ != root) {
      if (HcclResult e = readFrom(root, peerSend(root), data, count * esize, why,
                                  count * esize >= kBypassCacheBytes);
          e != HCCL_SUCCESS) {
        return e;
      }
    }
    return endDirect(why);
  }
  return runCollective(
      what, count, slot_bytes_ / esize, why,
      [&](size_t off, size_t m) {
        if (rank_ == root) {
          std::memcpy(slot(root), data + off * esize, m * esize);
        }
      },
      [&](size_t off, size_t m) {
        if (rank_ != root) {
          std::memcpy(data + off * esize, slot(root), m * esize);
        }
      });
}

HcclResult Communicator::allGather(const void* send, void* recv, size_t count, HcclDataType type,
                                   std::string* why) {
  if (sockets_ != nullptr) {
    return overSockets([&] { return sockets_->allGather(send, recv, count, type, why); }, why);
  }
  const size_t esize = hcclElementSize(type);
  const CollectiveDescriptor what{CollectiveKind::kAllGather, type, HCCL_REDUCE_RESERVED,
                                  CollectiveDescriptor::kNoRoot, count};
  if (direct_) {
    // Note [Direct collectives]: every rank's input, straight into place
    // (apart when the output overlaps the input other than in place).
    const size_t bytes = count * esize;
    char* out = static_cast<char*>(recv);
    std::vector<char> deferred;
    if (send != out + rank_ * bytes && overlap(out, size_ * bytes, send, bytes)) {
      deferred.resize(size_ * bytes);
      out = deferred.data();
    }
    if (HcclResult e = beginDirect(what, send, recv, why); e != HCCL_SUCCESS) {
      return e;
    }
    for (uint32_t r = 0; r < size_; ++r) {
      if (HcclResult e = readFrom(r, peerSend(r), out + r * bytes, bytes, why,
                                  size_ * bytes >= kBypassCacheBytes);
          e != HCCL_SUCCESS) {
        return e;
      }
    }
    const HcclResult ended = endDirect(why);
    if (ended == HCCL_SUCCESS && !deferred.empty()) {
      std::memcpy(recv, out, size_ * bytes);
    }
    return ended;
  }
  return runCollective(
      what, count, slot_bytes_ / esize, why,
      [&](size_t off, size_t m) {
        std::memcpy(slot(rank_), static_cast<const char*>(send) + off * esize, m * esize);
      },
      [&](size_t off, size_t m) {
        for (uint32_t r = 0; r < size_; ++r) {
          std::memcpy(static_cast<char*>(recv) + (r * count + off) * esize, slot(r), m * esize);
        }
      });
}

HcclResult Communicator::reduceScatter(const void* send, void* recv, size_t recvCount,
                                       HcclDataType type, HcclReduceOp op, std::string* why) {
  if (sockets_ != nullptr) {
    return overSockets(
        [&] { return sockets_->reduceScatter(send, recv, recvCount, type, op, why); }, why);
  }
  const size_t esize = hcclElementSize(type);
  // A rank's buffer holds one piece for every destination rank.
  const size_t chunk = slot_bytes_ / (esize * size_);
  const CollectiveDescriptor what{CollectiveKind::kReduceScatter, type, op,
                                  CollectiveDescriptor::kNoRoot, recvCount};
  if (direct_) {
    // Note [Direct collectives]: this rank's piece of every rank's input.
    // The peers read every other piece of this rank's input, so an output
    // overlapping one of those (HCCL's in-place form writes the first) is
    // collected apart.
    const size_t bytes = recvCount * esize;
    const char* own = static_cast<const char*>(send) + rank_ * bytes;
    char* out = static_cast<char*>(recv);
    std::vector<char> deferred;
    if (out != own && overlap(out, bytes, send, size_ * bytes)) {
      deferred.resize(bytes);
      out = deferred.data();
    }
    if (HcclResult e = beginDirect(what, send, recv, why); e != HCCL_SUCCESS) {
      return e;
    }
    std::vector<uintptr_t> inputs(size_);
    for (uint32_t r = 0; r < size_; ++r) {
      inputs[r] = peerSend(r) + rank_ * bytes;
    }
    if (HcclResult e = reduceFrom(inputs, out, recvCount, type, op, why,
                                  bytes >= kBypassCacheBytes);
        e != HCCL_SUCCESS) {
      return e;
    }
    const HcclResult ended = endDirect(why);
    if (ended == HCCL_SUCCESS && !deferred.empty()) {
      std::memcpy(recv, out, bytes);
    }
    return ended;
  }
  return runCollective(
      what, recvCount, chunk, why,
      [&](size_t off, size_t m) {
        for (uint32_t r = 0; r < size_; ++r) {
          std::memcpy(slot(rank_) + r * m * esize,
                      static_cast<const char*>(send) + (r * recvCount + off) * esize, m * esize);
        }
      },
      [&](size_t off, size_t m) {
        // This rank's piece, combined in rank order in rank 0's buffer (only
        // this rank touches that piece of it).
        char* acc = slot(0) + rank_ * m * esize;
        for (uint32_t r = 1; r < size_; ++r) {
          reduceInto(acc, slot(r) + rank_ * m * esize, m, type, op);
        }
        std::memcpy(static_cast<char*>(recv) + off * esize, acc, m * esize);
      });
}

HcclResult Communicator::barrier(std::string* why) {
  if (sockets_ != nullptr) {
    return overSockets([&] { return sockets_->barrier(why); }, why);
  }
  return runCollective(CollectiveDescriptor{CollectiveKind::kBarrier}, 0, 1, why);
}

HcclResult Communicator::allToAllV(const char* send, const std::vector<uint64_t>& sendCounts,
                                   const std::vector<uint64_t>& sendDispls, char* recv,
                                   const std::vector<uint64_t>& recvCounts,
                                   const std::vector<uint64_t>& recvDispls, HcclDataType type,
                                   bool even, std::string* why) {
  if (sockets_ != nullptr) {
    return overSockets(
        [&] {
          return sockets_->allToAllV(
              send, sendCounts, sendDispls, recv, recvCounts, recvDispls, type, even, why);
        },
        why);
  }
  const size_t esize = hcclElementSize(type);
  const CollectiveDescriptor what{even ? CollectiveKind::kAllToAll : CollectiveKind::kAllToAllV,
                                  type};
  // First every rank publishes its counts, and all check that each pair
  // agrees: a mismatch fails every rank with the same message instead of
  // moving wrong data. [sendCounts[size], recvCounts[size]] in the buffer,
  // then sendDispls[size] when peers read this rank's send buffer directly
  // (Note [Direct collectives]); a rank overwrites its plan only in its
  // next collective, after every rank has read it.
  if (HcclResult error = checkUsable(why); error != HCCL_SUCCESS) {
    return error;
  }
  const size_t n = size_;
  std::vector<uint64_t> plan(2 * n);
  std::copy(sendCounts.begin(), sendCounts.end(), plan.begin());
  std::copy(recvCounts.begin(), recvCounts.end(), plan.begin() + n);
  if (direct_) {
    plan.insert(plan.end(), sendDispls.begin(), sendDispls.end());
  }
  std::memcpy(slot(rank_), plan.data(), plan.size() * sizeof(uint64_t));
  if (HcclResult error = begin(what, why); error != HCCL_SUCCESS) {
    return error;
  }
  if (direct_) {
    publishBuffers(send, recv);
  }
  if (HcclResult r = meet(exec_timeout_, why); r != HCCL_SUCCESS) {
    return r;
  }
  if (HcclResult r = checkAgreement(why); r != HCCL_SUCCESS) {
    return r;
  }
  auto planOf = [&](uint32_t r, size_t i) {
    uint64_t value;
    std::memcpy(&value, slot(r) + i * sizeof(uint64_t), sizeof value);
    return value;
  };
  uint64_t longest = 0; // the most elements any rank sends any other
  for (uint32_t from = 0; from < size_; ++from) {
    for (uint32_t to = 0; to < size_; ++to) {
      const uint64_t sent = planOf(from, to);
      const uint64_t expected = planOf(to, n + from);
      if (sent != expected) {
        *why = "rank " + std::to_string(from) + " sends " + std::to_string(sent) +
            " elements to rank " + std::to_string(to) + ", but rank " + std::to_string(to) +
            " expects " + std::to_string(expected) + " from rank " + std::to_string(from) +
            ": what each rank sends another (sendCounts) must be what that one receives "
            "from it (recvCounts)";
        return failed(HCCL_E_PARA, why);
      }
      longest = std::max(longest, sent);
    }
  }
  if (direct_) {
    // Note [Direct collectives]: what each rank sends this one, straight
    // into place (apart when the output overlaps the input, which the peers
    // read). Only now that every rank has checked the plan: a rank that
    // found it wrong (or gave up waiting) fails the others here.
    if (HcclResult r = checkNoRankFailed(why); r != HCCL_SUCCESS) {
      return r;
    }
    auto extent = [&](const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs) {
      uint64_t end = 0;
      for (size_t i = 0; i < n; ++i) {
        end = counts[i] != 0 ? std::max(end, displs[i] + counts[i]) : end;
      }
      return end * esize;
    };
    const size_t recv_bytes = extent(recvCounts, recvDispls);
    char* out = recv;
    std::vector<char> deferred;
    if (overlap(recv, recv_bytes, send, extent(sendCounts, sendDispls))) {
      deferred.resize(recv_bytes);
      out = deferred.data();
    }
    for (uint32_t from = 0; from < size_; ++from) {
      const uintptr_t at = peerSend(from) + planOf(from, 2 * n + rank_) * esize;
      if (HcclResult r = readFrom(from, at, out + recvDispls[from] * esize,
                                  recvCounts[from] * esize, why,
                                  recv_bytes >= kBypassCacheBytes);
          r != HCCL_SUCCESS) {
        return r;
      }
    }
    const HcclResult ended = endDirect(why);
    for (uint32_t from = 0; from < size_ && ended == HCCL_SUCCESS && !deferred.empty(); ++from) {
      std::memcpy(recv + recvDispls[from] * esize, out + recvDispls[from] * esize,
                  recvCounts[from] * esize);
    }
    return ended;
  }
  // Nobody overwrites its plan before everyone has read it.
  if (HcclResult r = meet(exec_timeout_, why); r != HCCL_SUCCESS) {
    return r;
  }
  // A rank's buffer holds one piece for every destination rank.
  const size_t piece = slot_bytes_ / (esize * n);
  auto length = [&](uint64_t count, size_t off) {
    return count > off ? std::min<uint64_t>(piece, count - off) : 0;
  };
  return inChunks(
      longest, piece, why,
      [&](size_t off, size_t) {
        for (uint32_t to = 0; to < size_; ++to) {
          if (const uint64_t m = length(sendCounts[to], off); m != 0) {
            std::memcpy(slot(rank_) + to * piece * esize, send + (sendDispls[to] + off) * esize,
                        m * esize);
          }
        }
      },
      [&](size_t off, size_t) {
        for (uint32_t from = 0; from < size_; ++from) {
          if (const uint64_t m = length(recvCounts[from], off); m != 0) {
            std::memcpy(recv + (recvDispls[from] + off) * esize,
                        slot(from) + rank_ * piece * esize, m * esize);
          }
        }
      });
}

// Note [Point-to-point meets a collective]
// HcclSend, HcclRecv and HcclBatchSendRecv do not meet the other ranks
// (Note [Point-to-point channels]), so a rank whose send or receive faces a
// collective on its peer is not caught by Note [Collective descriptors].
// It is a deadlock all the same: the peer's collective cannot pass its
// meeting before this rank arrives there, and this rank arrives only once
// its exchange is done, which needs the peer. The exchange finds it out
// whenever it has to wait (never on its fast path): for each peer it waits
// for, it first reads the peer's `reached` count, then whether its message
// with that peer is still blocked (a chunk put for the peer and not taken,
// or a receive the peer has put nothing for). A peer whose count is above
// this rank's is at a meeting this rank has not reached and stays there
// until this rank comes, so it can have done nothing for the exchange in
// between: reading in this order, a blocked message means a certain
// deadlock, never a race with a peer that just finished its part. The rank
// then records the pair of ranks, the collective's sequence number and
// its blocked message in the shared header before it fails, and every rank
// (the ones inside the collective wake up at once) fails with the same
// message, which names both sides, and the communicator is aborted.
std::string Communicator::pointToPointMismatch(uint32_t collective_rank, uint32_t p2p_rank,
                                               uint64_t sequence) const {
  const CollectiveDescriptor collective = region_->rank[collective_rank].posted[sequence % 2];
  const BlockedMessage m = region_->rank[p2p_rank].blocked;
  const std::string elements =
      "count=" + std::to_string(m.count) + ", " + typeName(m.type) + ", ";
  std::string p2p;
  if (m.messages == 1) {
    p2p = m.send ? "HcclSend(" + elements + "to rank " + std::to_string(m.peer) + ")"
                 : "HcclRecv(" + elements + "from rank " + std::to_string(m.peer) + ")";
  } else {
    p2p = "HcclBatchSendRecv of " + std::to_string(m.messages) + " messages, whose " +
        (m.send ? "send (" + elements + "to rank " : "receive (" + elements + "from rank ") +
        std::to_string(m.peer) + ") waits for it";
  }
  return "rank " + std::to_string(collective_rank) + " called " + describe(collective) +
      " as collective #" + std::to_string(sequence) + ", rank " + std::to_string(p2p_rank) +
      " called " + p2p + ": a send or receive cannot complete while its peer is inside a "
      "collective, so every rank must call the same collectives, and its sends and receives, "
      "in the same order. The communicator is aborted";
}

HcclResult Communicator::exchange(const std::vector<PeerMessage>& messages, std::string* why) {
  if (sockets_ != nullptr) {
    return overSockets([&] { return sockets_->exchange(messages, why); }, why);
  }
  if (HcclResult error = checkUsable(why); error != HCCL_SUCCESS) {
    return error;
  }
  // Sends go out one at a time, in order; receives progress from every peer
  // at once, each peer's in order (Note [Point-to-point channels]).
  std::vector<const PeerMessage*> sends;
  std::vector<std::vector<const PeerMessage*>> receives(size_);
  size_t receives_left = 0;
  std::vector<uint32_t> watched;
  for (const PeerMessage& m : messages) {
    if (m.send) {
      sends.push_back(&m);
    } else {
      receives[m.peer].push_back(&m);
      ++receives_left;
    }
    if (m.peer != rank_ && std::find(watched.begin(), watched.end(), m.peer) == watched.end()) {
      watched.push_back(m.peer);
    }
  }
  auto bytesOf = [](const PeerMessage& m) { return m.count * hcclElementSize(m.type); };

  size_t next_send = 0;
  uint64_t sent = 0;     // bytes of sends[next_send] put into this rank's buffer
  bool put_all = false;  // every chunk of it is put; waiting for the last to be taken
  std::vector<size_t> next_receive(size_, 0);
  std::vector<uint64_t> received(size_, 0); // bytes of the current receive from each peer

  // Puts the next chunk of the current send, or finishes it once taken.
  auto stepSend = [&]() {
    if (next_send == sends.size()) {
      return false;
    }
    const PeerMessage& m = *sends[next_send];
    Channel& ch = channel(rank_, m.peer);
    if (ch.taken.load() != ch.posted.load()) {
      return false; // the receiver has not copied the last chunk out yet
    }
    if (put_all) {
      ++next_send;
      sent = 0;
      put_all = false;
      return true;
    }
    const uint64_t total = bytesOf(m);
    const uint64_t len = std::min<uint64_t>(slot_bytes_, total - sent);
    if (len != 0) {
      std::memcpy(slot(rank_), m.data + sent, len);
    }
    ch.message_bytes.store(total);
    ch.message_type.store(static_cast<uint32_t>(m.type));
    ch.posted.fetch_add(1);
    ring();
    sent += len;
    put_all = sent == total;
    return true;
  };
  // Copies out a chunk from `peer` if one is there; false if none is.
  auto stepReceive = [&](uint32_t peer, HcclResult* error) {
    if (next_receive[peer] == receives[peer].size()) {
      return false;
    }
    Channel& ch = channel(peer, rank_);
    if (ch.posted.load() == ch.taken.load()) {
      return false;
    }
    const PeerMessage& m = *receives[peer][next_receive[peer]];
    const uint64_t total = bytesOf(m);
    const uint64_t their_bytes = ch.message_bytes.load();
    const auto their_type = static_cast<HcclDataType>(ch.message_type.load());
    if (their_bytes != total || their_type != m.type) {
      const size_t their_esize = hcclElementSize(their_type);
      *why = "rank " + std::to_string(peer) + " sends " +
          std::to_string(their_esize ? their_bytes / their_esize : their_bytes) + " elements of " +
          hcclDataTypeName(their_type) + ", but rank " + std::to_string(rank_) + " receives " +
          std::to_string(m.count) + " elements of " + hcclDataTypeName(m.type) +
          ": a receive must match its send in count and type";
      *error = failed(HCCL_E_PARA, why);
      return false;
    }
    const uint64_t len = std::min<uint64_t>(slot_bytes_, total - received[peer]);
    if (len != 0) {
      std::memcpy(m.data + received[peer], slot(peer), len);
    }
    received[peer] += len;
    ch.taken.fetch_add(1);
    ring();
    if (received[peer] == total) {
      ++next_receive[peer];
      received[peer] = 0;
      --receives_left;
    }
    return true;
  };
  auto canProgress = [&] {
    if (next_send < sends.size()) {
      const Channel& ch = channel(rank_, sends[next_send]->peer);
      if (ch.taken.load() == ch.posted.load()) {
        return true;
      }
    }
    for (uint32_t peer = 0; peer < size_; ++peer) {
      if (next_receive[peer] < receives[peer].size()) {
        const Channel& ch = channel(peer, rank_);
        if (ch.posted.load() != ch.taken.load()) {
          return true;
        }
      }
    }
    return false;
  };
  auto late = [&](const std::string& seconds) {
    std::string waits;
    if (next_send < sends.size()) {
      const PeerMessage& m = *sends[next_send];
      waits = "rank " + std::to_string(m.peer) + " to receive the " +
          std::to_string(m.count) + " elements this rank sends it";
    }
    for (uint32_t peer = 0; peer < size_; ++peer) {
      if (next_receive[peer] < receives[peer].size()) {
        const PeerMessage& m = *receives[peer][next_receive[peer]];
        waits += (waits.empty() ? "" : ", ") + std::string("rank ") + std::to_string(peer) +
            " to send the " + std::to_string(m.count) + " elements this rank receives from it";
      }
    }
    return "timed out after " + seconds + " s (rank " + std::to_string(rank_) + " of " +
        std::to_string(size_) + ") waiting for " + waits +
        ": every send needs a matching receive on its peer, and two ranks that both send "
        "first must batch the send with the receive (HcclBatchSendRecv). The limit is " +
        exec_timeout_origin_;
  };
  // Note [Point-to-point meets a collective].
  auto stuck = [&]() -> HcclResult {
    const uint64_t mine = meetings_;
    for (const uint32_t peer : watched) {
      if (region_->rank[peer].reached.load() <= mine) {
        continue; // not inside a collective this rank has not joined
      }
      const PeerMessage* blocked = nullptr;
      if (next_send < sends.size() && sends[next_send]->peer == peer) {
        const Channel& ch = channel(rank_, peer);
        if (ch.taken.load() != ch.posted.load()) {
          blocked = sends[next_send];
        }
      }
      if (blocked == nullptr && next_receive[peer] < receives[peer].size()) {
        const Channel& ch = channel(peer, rank_);
        if (ch.posted.load() == ch.taken.load()) {
          blocked = receives[peer][next_receive[peer]];
        }
      }
      if (blocked == nullptr) {
        continue;
      }
      region_->rank[rank_].blocked = BlockedMessage{static_cast<uint32_t>(messages.size()),
                                                    blocked->send ? 1u : 0u, peer, blocked->type,
                                                    blocked->count};
      // The peer is inside the collective after this rank's last one.
      const uint64_t sequence = current_.sequence + 1;
      region_->mismatch_sequence.store(sequence);
      uint32_t none = 0;
      region_->mismatch_ranks.compare_exchange_strong(none, (peer + 1) << 16 | (rank_ + 1));
      *why = pointToPointMismatch(peer, rank_, sequence);
      return failed(HCCL_E_PARA, why);
    }
    return HCCL_SUCCESS;
  };
  for (;;) {
    HcclResult error = HCCL_SUCCESS;
    bool moved = stepSend();
    for (uint32_t peer = 0; peer < size_ && error == HCCL_SUCCESS; ++peer) {
      // Drains what the peer has put; the peer waits for each chunk to go.
      while (stepReceive(peer, &error)) {
        moved = true;
      }
    }
    if (error != HCCL_SUCCESS) {
      return error;
    }
    if (next_send == sends.size() && receives_left == 0) {
      return HCCL_SUCCESS;
    }
    if (!moved) {
      if (HcclResult r = await(canProgress, watched, exec_timeout_, late, stuck, why);
          r != HCCL_SUCCESS) {
        return r;
      }
    }
  }
}

} // namespace npu_sim
