// The extern "C" HCCL entry points of the simulator (the functions of
// ../cann/hccl_functions.h): argument checks on the calling thread, then the
// collective as device work on the given stream (collective_comm.h).
//
// HCCL reports failures by code only; the simulator also sets the runtime's
// recent error message (aclGetRecentErrMsg), which torch-npu shows, and a
// collective that fails on the device (a peer exited, a timeout) is reported
// like any failed device work by the next synchronizing call.
#pragma GCC visibility push(default)
#include "hccl_functions.h"
#include "npu_sim_ext.h"
#pragma GCC visibility pop

#include <arpa/inet.h>
#include <cxxabi.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api_guard.h"
#include "activity.h"
#include "api_impl.h"
#include "collective_comm.h"
#include "collective_reduce.h"
#include "errors.h"
#include "rank_devices.h"
#include "rank_table.h"
#include "runtime.h"
#include "socket_rendezvous.h"
#include "stream.h"

// Every function of the contract must be defined here (see acl_api.cpp).
#define NPU_SIM_TAKE_ADDRESS(ret, name, params, args) reinterpret_cast<void*>(&::name),
[[maybe_unused]] __attribute__((used)) static void* const kEveryHcclFunction[] = {
    TORCH_NPU_HCCL_FUNCTIONS(NPU_SIM_TAKE_ADDRESS)};
#undef NPU_SIM_TAKE_ADDRESS

namespace npu_sim {
namespace {

HcclResult hcclFail(HcclResult code, const char* api, const std::string& why) {
  setRecentError(std::string(api) + ": " + why);
  return code;
}

template <typename Fn>
HcclResult guardedHccl(const char* api, Fn&& fn) {
  try {
    return fn();
  } catch (abi::__forced_unwind&) {
    throw;
  } catch (const std::bad_alloc&) {
    return hcclFail(HCCL_E_MEMORY, api, "the host is out of memory");
  } catch (const std::exception& e) {
    return hcclFail(HCCL_E_INTERNAL, api, std::string("internal error: ") + e.what());
  }
}

// Communicators by handle: a handle is checked before use, and a collective
// in flight keeps its communicator alive after HcclCommDestroy.
class CommRegistry {
 public:
  static CommRegistry& get() {
    static auto* registry = new CommRegistry(); // never destroyed: used at exit
    return *registry;
  }
  HcclComm add(std::shared_ptr<Communicator> comm) {
    std::lock_guard<std::mutex> lock(mutex_);
    HcclComm handle = comm.get();
    comms_.emplace(handle, std::move(comm));
    return handle;
  }
  std::shared_ptr<Communicator> find(HcclComm handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = comms_.find(handle);
    return it == comms_.end() ? nullptr : it->second;
  }
  bool remove(HcclComm handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    return comms_.erase(handle) != 0;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<HcclComm, std::shared_ptr<Communicator>> comms_;
};

HcclResult findComm(const char* api, HcclComm handle, std::shared_ptr<Communicator>* out) {
  if (handle == nullptr) {
    return hcclFail(HCCL_E_PTR, api, "comm is null");
  }
  *out = CommRegistry::get().find(handle);
  if (*out == nullptr) {
    return hcclFail(HCCL_E_PARA, api,
                    "comm is not a live communicator (destroyed, or not made by "
                    "HcclCommInitRootInfo)");
  }
  return HCCL_SUCCESS;
}

// Reads one property of a communicator into `out`.
template <typename T, typename Get>
HcclResult queryComm(const char* api, HcclComm handle, T* out, const char* out_name, Get get) {
  return guardedHccl(api, [&] {
    std::shared_ptr<Communicator> comm;
    if (HcclResult r = findComm(api, handle, &comm); r != HCCL_SUCCESS) {
      return r;
    }
    if (out == nullptr) {
      return hcclFail(HCCL_E_PTR, api, std::string(out_name) + " is null");
    }
    *out = get(*comm);
    return HCCL_SUCCESS;
  });
}

HcclResult checkType(const char* api, HcclDataType type) {
  if (hcclElementSize(type) == 0) {
    return hcclFail(HCCL_E_NOT_SUPPORT, api,
                    std::string("data type ") + hcclDataTypeName(type) + " (" +
                        std::to_string(static_cast<int>(type)) +
                        ") is not supported: use an integer type of 8 to 64 bits, fp16, "
                        "bfp16, fp32 or fp64");
  }
  return HCCL_SUCCESS;
}

HcclResult checkOp(const char* api, HcclReduceOp op) {
  if (!isValidReduceOp(op)) {
    return hcclFail(HCCL_E_PARA, api,
                    "reduce op " + std::to_string(static_cast<int>(op)) +
                        " is not one of HCCL_REDUCE_SUM, _PROD, _MAX, _MIN");
  }
  return HCCL_SUCCESS;
}

// The first failing check, run in order; HCCL_SUCCESS if none fails.
template <typename... Check>
HcclResult firstFailure(Check&&... checks) {
  HcclResult result = HCCL_SUCCESS;
  ((result == HCCL_SUCCESS ? void(result = checks()) : void()), ...);
  return result;
}

// Checks that [p, p + count elements) is live memory of the communicator's
// device and returns the address device work reads and writes it at (none
// for no elements).
HcclResult deviceBuffer(const char* api, const char* role, const void* p, uint64_t count,
                        HcclDataType type, const Communicator& comm, char** host) {
  if (count == 0) {
    *host = nullptr;
    return HCCL_SUCCESS;
  }
  const uint64_t esize = hcclElementSize(type);
  // Also small enough that callers may multiply it by the rank count (the
  // gathered buffer's size) once it has passed this check.
  if (count > UINT64_MAX / esize / (comm.size() + 1)) {
    return hcclFail(HCCL_E_PARA, api, std::string(role) + " count is too large");
  }
  if (p == nullptr) {
    return hcclFail(HCCL_E_PTR, api, std::string(role) + " is null");
  }
  Runtime& rt = Runtime::get();
  const AddressLayout& layout = rt.layout();
  const auto address = reinterpret_cast<uintptr_t>(p);
  std::string why;
  if (!layout.inDeviceRange(address)) {
    why = "is not device memory (HCCL reads and writes device memory only)";
  } else if (layout.windowOf(address) != comm.device()) {
    why = "is memory of device " + std::to_string(layout.windowOf(address)) +
        ", but the communicator belongs to device " + std::to_string(comm.device());
  } else if (!rt.windowMemory(address).checkRange(address, count * esize, &why)) {
    why = "is not valid for " + std::to_string(count * esize) + " bytes: " + why;
  }
  if (!why.empty()) {
    char where[32];
    std::snprintf(where, sizeof where, "%p", p);
    return hcclFail(HCCL_E_PARA, api, std::string(role) + " " + where + " " + why);
  }
  *host = reinterpret_cast<char*>(layout.toHost(address));
  return HCCL_SUCCESS;
}

// Device memory a collective reads (send buffers) and writes (receive
// buffers), for the race detector (race_detector.h).
using Accesses = std::vector<npuSimMemAccess>;

npuSimMemAccess bufferAccess(const void* device_buffer, uint64_t count, HcclDataType type,
                             bool write) {
  return npuSimMemAccess{device_buffer, static_cast<size_t>(count * hcclElementSize(type)),
                         write ? 1u : 0u};
}

// What a collective's activity record says it moved (Note [Collective
// activity records] in activity.h): the bytes of the call's count (count x
// element size) and, for point-to-point work, the peer rank.
struct Traffic {
  uint64_t bytes = 0;
  int32_t peer = -1;
};

uint64_t bytesOf(uint64_t count, HcclDataType type) {
  return count * hcclElementSize(type);
}

// Launches `body(comm, &why)` as device work named `api` on `stream`,
// declaring `accesses`; its activity record carries `traffic`.
template <typename Body>
HcclResult launch(const char* api, aclrtStream stream, std::shared_ptr<Communicator> comm,
                  const Accesses& accesses, Traffic traffic, Body body) {
  Runtime& rt = Runtime::get();
  Stream* s = nullptr;
  if (rt.stream(stream, api, &s) != ACL_SUCCESS) {
    return HCCL_E_RUNTIME; // the recent error message says why
  }
  if (s->device() != comm->device()) {
    return hcclFail(HCCL_E_PARA, api,
                    "the stream belongs to device " + std::to_string(s->device()) +
                        ", the communicator to device " + std::to_string(comm->device()));
  }
  // An aborted communicator refuses work at once, saying why; work queued
  // before the abort became known fails on the device the same way.
  if (std::string why; comm->checkUsable(&why) != HCCL_SUCCESS) {
    return hcclFail(comm->asyncError(), api, why);
  }
  struct Closure {
    const char* api;
    std::shared_ptr<Communicator> comm;
    Traffic traffic;
    Body body;
  };
  npuSimWork work{};
  work.name = api;
  work.ctx = new Closure{api, std::move(comm), traffic, std::move(body)};
  work.run = [](void* ctx) -> aclError {
    auto* closure = static_cast<Closure*>(ctx);
    const bool recording = activity::enabled();
    closure->comm->timeWaits(recording);
    std::string why;
    const HcclResult result = closure->body(*closure->comm, &why);
    if (recording) {
      const Communicator::WaitTimes waits = closure->comm->waitTimes();
      activity::setRunningCollective({closure->traffic.bytes, closure->comm->size(),
                                      closure->comm->rank(), closure->traffic.peer, waits.wait_ns,
                                      waits.sync_ns});
    }
    if (result == HCCL_SUCCESS) {
      return ACL_SUCCESS;
    }
    const Communicator& comm = *closure->comm;
    setWorkErrorMessage((std::string(closure->api) + " failed on rank " +
                         std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) +
                         ": " + why)
                            .c_str());
    return ACL_ERROR_RT_AICORE_EXCEPTION;
  };
  work.release = [](void* ctx) { delete static_cast<Closure*>(ctx); };
  if (impl::launchWork(stream, &work, accesses.data(), accesses.size(), nullptr) != ACL_SUCCESS) {
    delete static_cast<Closure*>(work.ctx);
    return HCCL_E_RUNTIME;
  }
  return HCCL_SUCCESS;
}

HcclResult checkRoot(const char* api, uint32_t root, const Communicator& comm) {
  if (root >= comm.size()) {
    return hcclFail(HCCL_E_PARA, api,
                    "root " + std::to_string(root) + " is not a rank of this communicator of " +
                        std::to_string(comm.size()));
  }
  return HCCL_SUCCESS;
}

// A point-to-point peer: another rank of the communicator (or this rank
// itself, only within a batch that also receives from it).
HcclResult checkPeer(const char* api, const char* role, uint32_t peer, const Communicator& comm,
                     bool self_allowed) {
  if (peer >= comm.size()) {
    return hcclFail(HCCL_E_PARA, api,
                    std::string(role) + " " + std::to_string(peer) +
                        " is not a rank of this communicator of " + std::to_string(comm.size()) +
                        " ranks (0 to " + std::to_string(comm.size() - 1) + ")");
  }
  if (peer == comm.rank() && !self_allowed) {
    return hcclFail(HCCL_E_PARA, api,
                    std::string(role) + " " + std::to_string(peer) +
                        " is this rank itself; a rank exchanges with itself only within "
                        "HcclBatchSendRecv");
  }
  return HCCL_SUCCESS;
}

// HcclSend and HcclRecv: one message, as a batch of one.
HcclResult sendOrReceive(const char* api, bool send, void* buf, uint64_t count,
                         HcclDataType dataType, uint32_t peer, HcclComm comm,
                         aclrtStream stream) {
  return guardedHccl(api, [&] {
    std::shared_ptr<Communicator> c;
    char* data = nullptr;
    const HcclResult refused = firstFailure(
        [&] { return findComm(api, comm, &c); }, [&] { return checkType(api, dataType); },
        [&] { return checkPeer(api, send ? "destRank" : "srcRank", peer, *c, false); },
        [&] {
          return deviceBuffer(api, send ? "sendBuf" : "recvBuf", buf, count, dataType, *c,
                              &data);
        });
    if (refused != HCCL_SUCCESS) {
      return refused;
    }
    // Even an empty message goes out: its receiver checks that it expected
    // no elements.
    const PeerMessage message{send, peer, data, count, dataType};
    const Traffic traffic{bytesOf(count, dataType), static_cast<int32_t>(peer)};
    return launch(api, stream, std::move(c), {bufferAccess(buf, count, dataType, !send)}, traffic,
                  [=](Communicator& comm, std::string* why) {
      return comm.exchange({message}, why);
    });
  });
}

// Reads one uint64_t per rank from the host array `p` (HcclAlltoAllV's
// counts and displacements).
HcclResult hostCounts(const char* api, const char* role, const void* p, const Communicator& comm,
                      std::vector<uint64_t>* out) {
  if (p == nullptr) {
    return hcclFail(HCCL_E_PTR, api, std::string(role) + " is null");
  }
  const auto* values = static_cast<const uint64_t*>(p);
  out->assign(values, values + comm.size());
  for (const uint64_t v : *out) {
    if (v > (uint64_t{1} << 48)) {
      return hcclFail(HCCL_E_PARA, api,
                      std::string(role) + " holds " + std::to_string(v) +
                          ", more elements than any device buffer");
    }
  }
  return HCCL_SUCCESS;
}

// The elements [0, extent) an all-to-all reads or writes: up to the end of
// the farthest piece.
uint64_t extentOf(const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs) {
  uint64_t extent = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] != 0) {
      extent = std::max(extent, displs[i] + counts[i]);
    }
  }
  return extent;
}

HcclResult allToAll(const char* api, bool even, const void* sendBuf,
                    std::vector<uint64_t> sendCounts, std::vector<uint64_t> sdispls,
                    HcclDataType sendType, const void* recvBuf, std::vector<uint64_t> recvCounts,
                    std::vector<uint64_t> rdispls, HcclDataType recvType,
                    std::shared_ptr<Communicator> c, aclrtStream stream) {
  char* send = nullptr;
  char* recv = nullptr;
  const HcclResult refused = firstFailure(
      [&] { return checkType(api, sendType); }, [&] { return checkType(api, recvType); },
      [&] {
        return sendType == recvType
            ? HCCL_SUCCESS
            : hcclFail(HCCL_E_NOT_SUPPORT, api,
                       std::string("sendType ") + hcclDataTypeName(sendType) +
                           " and recvType " + hcclDataTypeName(recvType) +
                           " differ; the simulator exchanges one type (convert first)");
      },
      [&] {
        return deviceBuffer(api, "sendBuf", sendBuf, extentOf(sendCounts, sdispls), sendType, *c,
                            &send);
      },
      [&] {
        return deviceBuffer(api, "recvBuf", recvBuf, extentOf(recvCounts, rdispls), recvType, *c,
                            &recv);
      });
  if (refused != HCCL_SUCCESS) {
    return refused;
  }
  const Accesses accesses{bufferAccess(sendBuf, extentOf(sendCounts, sdispls), sendType, false),
                          bufferAccess(recvBuf, extentOf(recvCounts, rdispls), recvType, true)};
  // Launched even when this rank moves nothing: the others may, and every
  // rank checks the whole plan.
  Traffic traffic;
  for (const uint64_t count : sendCounts) {
    traffic.bytes += bytesOf(count, sendType);
  }
  return launch(api, stream, std::move(c), accesses, traffic,
                [=, sc = std::move(sendCounts), sd = std::move(sdispls),
                 rc = std::move(recvCounts), rd = std::move(rdispls)](Communicator& comm,
                                                                      std::string* why) {
                  return comm.allToAllV(send, sc, sd, recv, rc, rd, sendType, even, why);
                });
}

HcclResult initCommunicator(const char* api, uint32_t nRanks, const HcclRootInfo* rootInfo,
                            uint32_t rank, const HcclCommConfig* config, HcclComm* comm) {
  return guardedHccl(api, [&] {
    if (rootInfo == nullptr || comm == nullptr) {
      return hcclFail(HCCL_E_PTR, api, rootInfo == nullptr ? "rootInfo is null" : "comm is null");
    }
    Runtime& rt = Runtime::get();
    Device* device = nullptr;
    if (rt.check(api) != ACL_SUCCESS || rt.currentDevice(api, &device) != ACL_SUCCESS) {
      return HCCL_E_RUNTIME; // e.g. no aclrtSetDevice yet; the recent error says so
    }
    std::shared_ptr<Communicator> created;
    std::string why;
    const HcclResult result =
        Communicator::create(*rootInfo, nRanks, rank, device->id(), device->physicalId(), config,
                             &created, &why);
    if (result != HCCL_SUCCESS) {
      return hcclFail(result, api, why);
    }
    *comm = CommRegistry::get().add(std::move(created));
    return HCCL_SUCCESS;
  });
}

// HcclCommInitClusterInfo(Config): the rank's place comes from the rank
// table; the ranks meet at the segment the table's bytes name.
HcclResult initFromRankTable(const char* api, const char* clusterInfo, uint32_t rank,
                             const HcclCommConfig* config, HcclComm* comm) {
  return guardedHccl(api, [&] {
    if (comm == nullptr) {
      return hcclFail(HCCL_E_PTR, api, "comm is null");
    }
    RankTable table;
    std::string why;
    if (!readRankTable(clusterInfo, &table, &why)) {
      return hcclFail(HCCL_E_PARA, api, why);
    }
    if (rank >= table.ranks.size()) {
      return hcclFail(HCCL_E_PARA, api,
                      "rank " + std::to_string(rank) + " is not in the rank table '" + clusterInfo + "', which has ranks 0.." +
                          std::to_string(table.ranks.size() - 1));
    }
    Runtime& rt = Runtime::get();
    Device* device = nullptr;
    if (rt.check(api) != ACL_SUCCESS || rt.currentDevice(api, &device) != ACL_SUCCESS) {
      return HCCL_E_RUNTIME; // e.g. no aclrtSetDevice yet; the recent error says so
    }
    const RankTable::Rank& mine = table.ranks[rank];
    if (mine.device_id != static_cast<uint32_t>(device->id())) {
      return hcclFail(HCCL_E_PARA, api,
                      "rank " + std::to_string(rank) + " is device " + std::to_string(mine.device_id) +
                          " of server " + mine.server_id + " in the rank table '" + clusterInfo +
                          "', but the calling thread's device is " + std::to_string(device->id()) +
                          ": set that device first (torch.npu.set_device / aclrtSetDevice)");
    }
    HcclRootInfo root{};
    if (table.servers.size() == 1) {
      rankTableRootInfo(table.content, nullptr, &root);
    } else {
      // Note [Socket transport]: the ranks of several servers meet over TCP
      // at rank 0's server (its server_id), port HCCL_IF_BASE_PORT, where
      // rank 0 runs the rendezvous server.
      const std::string& first = table.ranks[0].server_id;
      SocketAddress rendezvous;
      in_addr parsed{};
      if (inet_pton(AF_INET, first.c_str(), &parsed) != 1) {
        return hcclFail(HCCL_E_PARA, api,
                        "the rank table '" + std::string(clusterInfo) + "' lists " +
                            std::to_string(table.servers.size()) + " servers, and rank 0's server_id '" +
                            first + "' is not an IPv4 address: the ranks of several servers meet at "
                            "rank 0's server over TCP, so its server_id must be its address");
      }
      copyString(rendezvous.ip, sizeof rendezvous.ip, first);
      rendezvous.port = basePort();
      if (rank == 0) {
        if (HcclResult r = rendezvousServerOn(rendezvous.port, &why); r != HCCL_SUCCESS) {
          return hcclFail(r, api, why + " (HCCL_IF_BASE_PORT sets the port)");
        }
      }
      rankTableRootInfo(table.content, &rendezvous, &root);
    }
    std::shared_ptr<Communicator> created;
    // The table placed the ranks: each on its own device of its server
    // (readRankTable refuses a device listed twice), checked above, and its
    // servers may be one machine's addresses (a test on loopback), so the
    // devices are not compared again (Note [One device per rank of a machine]).
    const HcclResult result = Communicator::create(root, static_cast<uint32_t>(table.ranks.size()), rank,
                                                   device->id(), kUnplacedDevice, config,
                                                   &created, &why);
    if (result != HCCL_SUCCESS) {
      return hcclFail(result, api, why);
    }
    *comm = CommRegistry::get().add(std::move(created));
    return HCCL_SUCCESS;
  });
}

} // namespace
} // namespace npu_sim

using namespace npu_sim;

extern "C" {

NPU_SIM_EXPORT HcclResult HcclGetRootInfo(HcclRootInfo* rootInfo) {
  const char* api = "HcclGetRootInfo";
  return guardedHccl(api, [&] {
    if (rootInfo == nullptr) {
      return hcclFail(HCCL_E_PTR, api, "rootInfo is null");
    }
    std::string why;
    const HcclResult result = generateRootInfo(rootInfo, &why);
    return result == HCCL_SUCCESS ? result : hcclFail(result, api, why);
  });
}

NPU_SIM_EXPORT HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo* rootInfo,
                                               uint32_t rank, HcclComm* comm) {
  return initCommunicator("HcclCommInitRootInfo", nRanks, rootInfo, rank, nullptr, comm);
}

NPU_SIM_EXPORT HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks,
                                                     const HcclRootInfo* rootInfo, uint32_t rank,
                                                     const HcclCommConfig* config,
                                                     HcclComm* comm) {
  const char* api = "HcclCommInitRootInfoConfig";
  if (config == nullptr) {
    return hcclFail(HCCL_E_PTR, api, "config is null");
  }
  return initCommunicator(api, nRanks, rootInfo, rank, config, comm);
}

NPU_SIM_EXPORT HcclResult HcclCommInitClusterInfo(const char* clusterInfo, uint32_t rank, HcclComm* comm) {
  return initFromRankTable("HcclCommInitClusterInfo", clusterInfo, rank, nullptr, comm);
}

NPU_SIM_EXPORT HcclResult HcclCommInitClusterInfoConfig(const char* clusterInfo, uint32_t rank,
                                                        HcclCommConfig* config, HcclComm* comm) {
  const char* api = "HcclCommInitClusterInfoConfig";
  if (config == nullptr) {
    return hcclFail(HCCL_E_PTR, api, "config is null");
  }
  return initFromRankTable(api, clusterInfo, rank, config, comm);
}

NPU_SIM_EXPORT HcclResult HcclCommDestroy(HcclComm comm) {
  const char* api = "HcclCommDestroy";
  return guardedHccl(api, [&] {
    if (comm == nullptr) {
      return hcclFail(HCCL_E_PTR, api, "comm is null");
    }
    return CommRegistry::get().remove(comm)
        ? HCCL_SUCCESS
        : hcclFail(HCCL_E_PARA, api, "comm is not a live communicator");
  });
}

NPU_SIM_EXPORT HcclResult HcclGetRankSize(HcclComm comm, uint32_t* rankSize) {
  return queryComm("HcclGetRankSize", comm, rankSize, "rankSize",
                   [](const Communicator& c) { return c.size(); });
}

NPU_SIM_EXPORT HcclResult HcclGetRankId(HcclComm comm, uint32_t* rank) {
  return queryComm("HcclGetRankId", comm, rank, "rank",
                   [](const Communicator& c) { return c.rank(); });
}

NPU_SIM_EXPORT HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult* asyncError) {
  return queryComm("HcclGetCommAsyncError", comm, asyncError, "asyncError",
                   [](const Communicator& c) { return c.asyncError(); });
}

NPU_SIM_EXPORT int npuSimHcclCommIsDirect(void* comm, uint32_t* direct) {
  return queryComm("npuSimHcclCommIsDirect", static_cast<HcclComm>(comm), direct, "direct",
                   [](const Communicator& c) { return c.direct() ? 1u : 0u; });
}

NPU_SIM_EXPORT int npuSimHcclCommTransport(void* comm, uint32_t* transport) {
  return queryComm("npuSimHcclCommTransport", static_cast<HcclComm>(comm), transport,
                   "transport",
                   [](const Communicator& c) { return static_cast<uint32_t>(c.transport()); });
}

NPU_SIM_EXPORT int npuSimHcclCommUsesSockets(void* comm, uint32_t* sockets) {
  return queryComm("npuSimHcclCommUsesSockets", static_cast<HcclComm>(comm), sockets, "sockets",
                   [](const Communicator& c) { return c.usesSockets() ? 1u : 0u; });
}

NPU_SIM_EXPORT const char* HcclGetErrorString(HcclResult code) {
  switch (code) {
    case HCCL_SUCCESS: return "success";
    case HCCL_E_PARA: return "parameter error";
    case HCCL_E_PTR: return "empty pointer";
    case HCCL_E_MEMORY: return "memory error";
    case HCCL_E_INTERNAL: return "internal error";
    case HCCL_E_NOT_SUPPORT: return "not supported";
    case HCCL_E_NOT_FOUND: return "resource not found";
    case HCCL_E_UNAVAIL: return "resource unavailable";
    case HCCL_E_SYSCALL: return "system call failed";
    case HCCL_E_TIMEOUT: return "timeout";
    case HCCL_E_RUNTIME: return "runtime call failed";
    case HCCL_E_REMOTE: return "remote rank failed";
    default: return "HCCL error";
  }
}

NPU_SIM_EXPORT HcclResult HcclAllReduce(void* sendBuf, void* recvBuf, uint64_t count,
                                        HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                        aclrtStream stream) {
  const char* api = "HcclAllReduce";
  return guardedHccl(api, [&] {
    std::shared_ptr<Communicator> c;
    char* send = nullptr;
    char* recv = nullptr;
    const HcclResult refused = firstFailure(
        [&] { return findComm(api, comm, &c); }, [&] { return checkType(api, dataType); },
        [&] { return checkOp(api, op); },
        [&] { return deviceBuffer(api, "sendBuf", sendBuf, count, dataType, *c, &send); },
        [&] { return deviceBuffer(api, "recvBuf", recvBuf, count, dataType, *c, &recv); });
    if (refused != HCCL_SUCCESS) {
      return refused;
    }
    const Accesses accesses{bufferAccess(sendBuf, count, dataType, false),
                            bufferAccess(recvBuf, count, dataType, true)};
    return launch(api, stream, std::move(c), accesses, Traffic{bytesOf(count, dataType)},
                  [=](Communicator& comm, std::string* why) {
      return comm.allReduce(send, recv, count, dataType, op, -1, why);
    });
  });
}

NPU_SIM_EXPORT HcclResult HcclReduce(void* sendBuf, void* recvBuf, uint64_t count,
                                     HcclDataType dataType, HcclReduceOp op, uint32_t root,
                                     HcclComm comm, aclrtStream stream) {
  const char* api = "HcclReduce";
  return guardedHccl(api, [&] {
    std::shared_ptr<Communicator> c;
    char* send = nullptr;
    char* recv = nullptr;
    const HcclResult refused = firstFailure(
        [&] { return findComm(api, comm, &c); }, [&] { return checkType(api, dataType); },
        [&] { return checkOp(api, op); }, [&] { return checkRoot(api, root, *c); },
        [&] { return deviceBuffer(api, "sendBuf", sendBuf, count, dataType, *c, &send); },
        [&] {  // only the root receives
          return c->rank() == root
              ? deviceBuffer(api, "recvBuf", recvBuf, count, dataType, *c, &recv)
              : HCCL_SUCCESS;
        });
    if (refused != HCCL_SUCCESS) {
      return refused;
    }
    Accesses accesses{bufferAccess(sendBuf, count, dataType, false)};
    if (recv != nullptr) {
      accesses.push_back(bufferAccess(recvBuf, count, dataType, true));
    }
    return launch(api, stream, std::move(c), accesses, Traffic{bytesOf(count, dataType)},
                  [=](Communicator& comm, std::string* why) {
      return comm.allReduce(send, recv, count, dataType, op, root, why);
    });
  });
}

NPU_SIM_EXPORT HcclResult HcclBroadcast(void* buf, uint64_t count, HcclDataType dataType,
                                        uint32_t root, HcclComm comm, aclrtStream stream) {
  const char* api = "HcclBroadcast";
  return guardedHccl(api, [&] {
    std::shared_ptr<Communicator> c;
    char* data = nullptr;
    const HcclResult refused = firstFailure(
        [&] { return findComm(api, comm, &c); }, [&] { return checkType(api, dataType); },
        [&] { return checkRoot(api, root, *c); },
        [&] { return deviceBuffer(api, "buf", buf, count, dataType, *c, &data); });
    if (refused != HCCL_SUCCESS) {
      return refused;
    }
    // The root reads the buffer, the others write it.
    const Accesses accesses{bufferAccess(buf, count, dataType, c->rank() != root)};
    return launch(api, stream, std::move(c), accesses, Traffic{bytesOf(count, dataType)},
                  [=](Communicator& comm, std::string* why) {
      return comm.broadcast(data, count, dataType, root, why);
    });
  });
}

NPU_SIM_EXPORT HcclResult HcclAllGather(void* sendBuf, void* recvBuf, uint64_t sendCount,
                                        HcclDataType dataType, HcclComm comm,
                                        aclrtStream stream) {
  const char* api = "HcclAllGather";
  return guardedHccl(api, [&] {
    std::shared_ptr<Communicator> c;
    char* send = nullptr;
    char* recv = nullptr;
    const HcclResult refused = firstFailure(
        [&] { return findComm(api, comm, &c); }, [&] { return checkType(api, dataType); },
        [&] { return deviceBuffer(api, "sendBuf", sendBuf, sendCount, dataType, *c, &send); },
        [&] {
          return deviceBuffer(api, "recvBuf", recvBuf, sendCount * c->size(), dataType, *c,
                              &recv);
        });
    if (refused != HCCL_SUCCESS) {
      return refused;
    }
    const Accesses accesses{bufferAccess(sendBuf, sendCount, dataType, false),
                            bufferAccess(recvBuf, sendCount * c->size(), dataType, true)};
    return launch(api, stream, std::move(c), accesses, Traffic{bytesOf(sendCount, dataType)},
                  [=](Communicator& comm, std::string* why) {
      return comm.allGather(send, recv, sendCount, dataType, why);
    });
  });
}

NPU_SIM_EXPORT HcclResult HcclReduceScatter(void* sendBuf, void* recvBuf, uint64_t recvCount,
                                            HcclDataType dataType, HcclReduceOp op,
                                            HcclComm comm, aclrtStream stream) {
  const char* api = "HcclReduceScatter";
  return guardedHccl(api, [&] {
    std::shared_ptr<Communicator> c;
    char* send = nullptr;
    char* recv = nullptr;
    const HcclResult refused = firstFailure(
        [&] { return findComm(api, comm, &c); }, [&] { return checkType(api, dataType); },
        [&] { return checkOp(api, op); },
        [&] { return deviceBuffer(api, "recvBuf", recvBuf, recvCount, dataType, *c, &recv); },
        [&] {
          return deviceBuffer(api, "sendBuf", sendBuf, recvCount * c->size(), dataType, *c,
                              &send);
        });
    if (refused != HCCL_SUCCESS) {
      return refused;
    }
    const Accesses accesses{bufferAccess(sendBuf, recvCount * c->size(), dataType, false),
                            bufferAccess(recvBuf, recvCount, dataType, true)};
    return launch(api, stream, std::move(c), accesses, Traffic{bytesOf(recvCount, dataType)},
                  [=](Communicator& comm, std::string* why) {
      return comm.reduceScatter(send, recv, recvCount, dataType, op, why);
    });
  });
}

NPU_SIM_EXPORT HcclResult HcclBarrier(HcclComm comm, aclrtStream stream) {
  const char* api = "HcclBarrier";
  return guardedHccl(api, [&] {
    std::shared_ptr<Communicator> c;
    if (HcclResult refused = findComm(api, comm, &c); refused != HCCL_SUCCESS) {
      return refused;
    }
    return launch(api, stream, std::move(c), {}, Traffic{},
                  [](Communicator& comm, std::string* why) { return comm.barrier(why); });
  });
}

NPU_SIM_EXPORT HcclResult HcclSend(void* sendBuf, uint64_t count, HcclDataType dataType,
                                   uint32_t destRank, HcclComm comm, aclrtStream stream) {
  return sendOrReceive("HcclSend", true, sendBuf, count, dataType, destRank, comm, stream);
}

NPU_SIM_EXPORT HcclResult HcclRecv(void* recvBuf, uint64_t count, HcclDataType dataType,
                                   uint32_t srcRank, HcclComm comm, aclrtStream stream) {
  return sendOrReceive("HcclRecv", false, recvBuf, count, dataType, srcRank, comm, stream);
}

NPU_SIM_EXPORT HcclResult HcclBatchSendRecv(HcclSendRecvItem* sendRecvInfo, uint32_t itemNum,
                                            HcclComm comm, aclrtStream stream) {
  const char* api = "HcclBatchSendRecv";
  return guardedHccl(api, [&] {
    std::shared_ptr<Communicator> c;
    if (HcclResult refused = findComm(api, comm, &c); refused != HCCL_SUCCESS) {
      return refused;
    }
    if (sendRecvInfo == nullptr && itemNum != 0) {
      return hcclFail(HCCL_E_PTR, api, "sendRecvInfo is null");
    }
    std::vector<PeerMessage> messages;
    messages.reserve(itemNum);
    Accesses accesses;
    for (uint32_t i = 0; i < itemNum; ++i) {
      const HcclSendRecvItem& item = sendRecvInfo[i];
      const std::string which = "sendRecvInfo[" + std::to_string(i) + "]";
      if (item.sendRecvType != HCCL_SEND && item.sendRecvType != HCCL_RECV) {
        return hcclFail(HCCL_E_PARA, api,
                        which + ".sendRecvType is " +
                            std::to_string(static_cast<int>(item.sendRecvType)) +
                            ", neither HCCL_SEND (0) nor HCCL_RECV (1)");
      }
      const bool send = item.sendRecvType == HCCL_SEND;
      char* data = nullptr;
      const std::string peer_role = which + ".remoteRank";
      const std::string buf_role = which + ".buf";
      const HcclResult refused = firstFailure(
          [&] { return checkType(api, item.dataType); },
          [&] { return checkPeer(api, peer_role.c_str(), item.remoteRank, *c, true); },
          [&] {
            return deviceBuffer(api, buf_role.c_str(), item.buf, item.count, item.dataType, *c,
                                &data);
          });
      if (refused != HCCL_SUCCESS) {
        return refused;
      }
      messages.push_back({send, item.remoteRank, data, item.count, item.dataType});
      accesses.push_back(bufferAccess(item.buf, item.count, item.dataType, !send));
    }
    if (messages.empty()) {
      return HCCL_SUCCESS;
    }
    Traffic traffic{0, static_cast<int32_t>(messages.front().peer)};
    for (const PeerMessage& m : messages) {
      traffic.bytes += bytesOf(m.count, m.type);
      if (static_cast<int32_t>(m.peer) != traffic.peer) {
        traffic.peer = -1; // several peers: none to name
      }
    }
    return launch(api, stream, std::move(c), accesses, traffic,
                  [messages = std::move(messages)](Communicator& comm, std::string* why) {
                    return comm.exchange(messages, why);
                  });
  });
}

NPU_SIM_EXPORT HcclResult HcclAlltoAll(const void* sendBuf, uint64_t sendCount,
                                       HcclDataType sendType, const void* recvBuf,
                                       uint64_t recvCount, HcclDataType recvType, HcclComm comm,
                                       aclrtStream stream) {
  const char* api = "HcclAlltoAll";
  return guardedHccl(api, [&] {
    std::shared_ptr<Communicator> c;
    if (HcclResult refused = findComm(api, comm, &c); refused != HCCL_SUCCESS) {
      return refused;
    }
    for (const uint64_t count : {sendCount, recvCount}) {
      if (count > (uint64_t{1} << 48) / c->size()) {
        return hcclFail(HCCL_E_PARA, api, "count " + std::to_string(count) + " is too large");
      }
    }
    const size_t n = c->size();
    std::vector<uint64_t> sdispls(n);
    std::vector<uint64_t> rdispls(n);
    for (size_t r = 0; r < n; ++r) {
      sdispls[r] = r * sendCount;
      rdispls[r] = r * recvCount;
    }
    return allToAll(api, true, sendBuf, std::vector<uint64_t>(n, sendCount), std::move(sdispls),
                    sendType, recvBuf, std::vector<uint64_t>(n, recvCount), std::move(rdispls),
                    recvType, std::move(c), stream);
  });
}

NPU_SIM_EXPORT HcclResult HcclAlltoAllV(const void* sendBuf, const void* sendCounts,
                                        const void* sdispls, HcclDataType sendType,
                                        const void* recvBuf, const void* recvCounts,
                                        const void* rdispls, HcclDataType recvType,
                                        HcclComm comm, aclrtStream stream) {
  const char* api = "HcclAlltoAllV";
  return guardedHccl(api, [&] {
    std::shared_ptr<Communicator> c;
    std::vector<uint64_t> sc, sd, rc, rd;
    const HcclResult refused = firstFailure(
        [&] { return findComm(api, comm, &c); },
        [&] { return hostCounts(api, "sendCounts", sendCounts, *c, &sc); },
        [&] { return hostCounts(api, "sdispls", sdispls, *c, &sd); },
        [&] { return hostCounts(api, "recvCounts", recvCounts, *c, &rc); },
        [&] { return hostCounts(api, "rdispls", rdispls, *c, &rd); });
    if (refused != HCCL_SUCCESS) {
      return refused;
    }
    return allToAll(api, false, sendBuf, std::move(sc), std::move(sd), sendType, recvBuf,
                    std::move(rc), std::move(rd), recvType, std::move(c), stream);
  });
}

} // extern "C"
