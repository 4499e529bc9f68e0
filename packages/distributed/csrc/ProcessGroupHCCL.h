// ProcessGroupHCCL: the `hccl` backend of torch.distributed for npu tensors.
//
// Like ProcessGroupNCCL, a collective runs as device work on a communicator
// stream of the tensors' device, asynchronously to the host:
//   1. the communicator stream waits (an event) for the work the caller's
//      current stream has queued, which may still be writing the inputs;
//   2. HCCL's collective is launched on the communicator stream, and the
//      tensors are recorded on that stream so the caching allocator does not
//      reuse their memory before it is done;
//   3. WorkHCCL::wait() makes the caller's current stream wait for the
//      collective's end; the host waits only in barrier().
//
// Note [Multi-stream memory reuse]
// MULTI_STREAM_MEMORY_REUSE (torch_npu's variable) says how a collective
// keeps its tensors' memory from being reused while the communicator stream
// still works on it:
//   0  record_stream on the communicator stream (PyTorch's way): freed
//      memory is reused only once an event recorded at its free has
//      completed, found by later allocations; with the host far ahead of
//      the device that delays reuse and raises the peak.
//   1  (default) as 0, and wait() (or synchronize()) erases that use again
//      for the tensors allocated on the stream that waits: work queued on
//      that stream after the wait is ordered after the collective, and only
//      that stream reuses their memory, so it may be reused at once. The
//      work holds weak references: it does not extend the tensors' lives.
//   2  no record_stream: the work holds the tensors (strong references,
//      which may extend their lives) until wait() lets go of those
//      allocated on the waiting stream. The others, and all of them when
//      the work is destroyed without a wait, get the use recorded then
//      (the safe fallback).
// Tensors allocated on another stream than the waiting one keep the
// recorded use in every mode: erasing it could let that stream reuse
// memory the collective still reads or writes (torch_npu erases it anyway).
// A communicator is created per device on that device's first collective;
// its root info goes from rank 0 to the others through the c10d store.
//
// Note [One device per rank]
// Each device a rank runs the group's collectives on has its own
// communicator, which every rank must create together. A rank whose
// collectives move to another device while the others stay on theirs waits
// for them to create a communicator they never create, and they wait for it
// in their collectives: both hang until the group's timeout. (The common
// mistake, every rank's first collective before
// torch.npu.set_device(local_rank), e.g. an object collective, which puts
// the pickled bytes on the *current* device, puts every rank of a machine
// on npu:0; HCCL refuses that at once: the simulator's Note [One device per
// rank of a machine].) Hence:
//   - a group bound to a device (init_process_group(device_id=...)) refuses
//     tensors on another npu at once, naming both, as ProcessGroupNCCL does;
//   - otherwise a rank's first collective on a second device warns at once
//     (it is legitimate only if every rank moves at the same collective),
//     and a timeout while creating that communicator names the move.
//
// Note [HCCL timeouts]
// The group's timeout (init_process_group(timeout=...), new_group(timeout=
// ...); torch's default for hccl is 30 minutes) bounds both phases, as with
// NCCL; the HCCL variables, when set, bound them too, and the shorter limit
// wins. torch_npu documents the two as separate limits that both apply:
// the group's timeout for its watchdog, HCCL_CONNECT_TIMEOUT and
// HCCL_EXEC_TIMEOUT for HCCL itself.
//   connecting: every rank announces itself in the store, and each waits
//     for the others' announcements for min(timeout, HCCL_CONNECT_TIMEOUT)
//     before HcclCommInitRootInfoConfig, so a rank that never comes is
//     reported, by rank, within the timeout;
//   collectives: the communicator's hcclExecTimeOut is min(timeout,
//     HCCL_EXEC_TIMEOUT) in whole seconds (rounded up), which takes
//     precedence over HCCL_EXEC_TIMEOUT inside HCCL, as CANN documents for
//     every config field. A collective whose peers do not all arrive within
//     it fails, naming the collective, its sequence number and the missing
//     ranks, and the communicator is aborted.
//
// Note [Rebuilding a group's communicators]
// A communicator that failed (a rank died, collectives did not match, a
// timeout) is aborted: every later collective of the group fails at once.
// torch_npu.distributed.reinit_process_group(group) lets a job recover
// without destroying the group, as torch_npu's does: every rank of the
// group calls it at the same point, each destroys its communicators
// (after its queued collectives have ended or failed: each is bounded by
// the group's timeout), and the next collective creates new ones, together
// on every rank as the first did. The new communicators take the next
// root-info index, which every rank counts alike, so their store keys
// never meet the old ones. A rank that does not call it keeps collectives
// on the old communicator, which its peers no longer join: they time out,
// naming it. reinit_process_group(rebuild_link=False) keeps the
// communicators and checks that none has failed (torch_npu resumes them
// after a device restart, which the simulator has no counterpart of); a
// failed one raises, naming the rebuild.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "Watchdog.h"
#include "npu/HcclInterface.h"
#include "npu/NPUEvent.h"
#include "npu/NPUStream.h"

namespace c10d_npu {

// Note [Multi-stream memory reuse]: MULTI_STREAM_MEMORY_REUSE=0|1|2.
enum class MemoryReuse { RecordStream = 0, EraseAtWait = 1, HoldUntilWait = 2 };

// Read from the environment once (1 when unset); a bad value raises an
// error naming the accepted ones.
MemoryReuse memory_reuse_mode();

class ProcessGroupHCCL : public c10d::Backend {
 public:
  // The handle of one collective (or of several launched as one).
  class WorkHCCL : public c10d::Work {
   public:
    WorkHCCL(int rank, c10d::OpType type, const char* profiling_title, c10::Device device,
             std::vector<at::Tensor> outputs, bool host_waits);
    ~WorkHCCL() override;

    // The collective has finished on the device (raises its error if it failed).
    bool isCompleted() override;
    // The caller's current stream waits for the collective; the host too for
    // a barrier. Errors of the collective surface at the next synchronizing
    // call, as errors of device work do.
    bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
    void synchronize() override;
    std::vector<at::Tensor> result() override;
    // Completed with the outputs; waiting on it orders the waiter's stream
    // after the collective (what DDP's communication hooks use).
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

   private:
    friend class ProcessGroupHCCL;
    // Note [Multi-stream memory reuse]: called once the stream `waiting`
    // waits for the collective (null: the work is destroyed unwaited).
    void release_memory_uses(const c10_npu::NPUStream* waiting);

    c10::Device device_;
    MemoryReuse reuse_ = MemoryReuse::RecordStream;
    std::optional<c10_npu::NPUStream> comm_stream_;
    std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> recorded_; // EraseAtWait
    std::vector<c10::Storage> held_;                                  // HoldUntilWait
    std::vector<at::Tensor> outputs_;
    bool host_waits_;
    c10_npu::NPUEvent end_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
  };

  // `timeout` (init_process_group's or new_group's) bounds connecting and
  // every collective, as with NCCL; HCCL_CONNECT_TIMEOUT and
  // HCCL_EXEC_TIMEOUT, when set, bound them too (Note [HCCL timeouts]).
  // `rank_table`: the path of an HCCL rank table (RANK_TABLE_FILE), or empty.
  // With one, the group's first communicator is made from the table
  // (HcclCommInitClusterInfoConfig) instead of a root info that rank 0
  // shares through the store; the table must list `size` ranks.
  ProcessGroupHCCL(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                   std::chrono::milliseconds timeout, std::string rank_table = "");
  ~ProcessGroupHCCL() override;

  const std::string getBackendName() const override {
    return "hccl";
  }

  // Sequence numbers, as with NCCL: every rank starts at 0 and counts the
  // group's collectives (point-to-point operations excepted), so they agree
  // across ranks while the ranks call the same collectives. torch's
  // TORCH_DISTRIBUTED_DEBUG=DETAIL wrapper compares them with each
  // collective's fingerprint.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override {
    return seq_;
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // All-to-all: HcclAlltoAll for even splits, HcclAlltoAllV otherwise (and
  // for the list form, packed into one buffer).
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;

  // Point-to-point: HcclSend/HcclRecv on the communicator of the whole
  // group (HCCL has no tags: `tag` is ignored, as with NCCL). Between
  // startCoalescing() and endCoalescing() (batch_isend_irecv) they are only
  // collected, and endCoalescing() runs them as one HcclBatchSendRecv.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  // HCCL cannot receive from any source: raises, saying to name the source.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  bool supportsCoalescing() const override {
    return true;
  }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // gather and scatter: point-to-point between the root and each other rank
  // (the root's messages in one HcclBatchSendRecv), the root's own piece a
  // copy on the communicator stream.
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;

  // torch_npu.distributed.all_gather_into_tensor_uneven: rank r's input fills
  // outputSplitSizes[r] rows of the output (even when empty). One
  // HcclAlltoAllV that sends each rank's input whole to every rank.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_uneven(
      at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& outputSplitSizes);
  // torch_npu.distributed.reduce_scatter_tensor_uneven: rank r gets the
  // reduction of every rank's inputSplitSizes[r] rows for it. An
  // HcclAlltoAllV of the pieces, combined in rank order on each rank.
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_uneven(
      at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& inputSplitSizes,
      const c10d::ReduceOp& op);

  // Note [Rebuilding a group's communicators]: destroys every communicator
  // of the group; the next collective creates new ones. `reason` names the
  // caller in the warning about a queued collective that failed.
  void rebuild_communicators(const std::string& reason);
  // Note [Rebuilding a group's communicators]: raises if the communicator
  // of npu `device` (if it has one) has failed.
  void check_communicator_usable(c10::DeviceIndex device);

 private:
  // One send or receive collected while coalescing.
  struct PeerOp {
    bool send;
    int peer;
    at::Tensor tensor;
  };

  struct DeviceComm {
    HcclComm comm;
    c10_npu::NPUStream stream; // from the pool: collectives overlap compute
  };

  // The communicator and stream of `device`, created on first use (every
  // rank must reach this point: it waits for all of them).
  DeviceComm& device_comm(c10::Device device);
  // Note [One device per rank]: refuses `device` if the group is bound to
  // another npu.
  void check_bound_device(c10::Device device) const;

  // Runs `launch(comm, stream)` on the communicator stream of the tensors'
  // device, ordered after the caller's current stream, and returns its work.
  // Refuses to run while point-to-point operations are being coalesced.
  template <typename Launch>
  c10::intrusive_ptr<c10d::Work> collective(const std::vector<at::Tensor>& inputs,
                                            std::vector<at::Tensor> outputs, c10d::OpType type,
                                            const char* name, Launch launch,
                                            bool host_waits = false);
  template <typename Launch>
  c10::intrusive_ptr<c10d::Work> launch_work(const std::vector<at::Tensor>& inputs,
                                             std::vector<at::Tensor> outputs, c10d::OpType type,
                                             const char* name, Launch launch, bool host_waits);
  // A send or receive of `tensors` (one tensor) with `peer`.
  c10::intrusive_ptr<c10d::Work> point_to_point(std::vector<at::Tensor>& tensors, int peer,
                                                bool send);

  // Destroys every communicator of the group once its queued collectives
  // have ended, warning about one that failed (`when` says when). The
  // caller holds mutex_.
  void destroy_communicators(const std::string& when);

  // Waits (Note [HCCL timeouts]) until every rank has reached the creation
  // of communicator `index`; raises naming the ranks that did not.
  void wait_for_all_ranks(uint64_t index, c10::Device device);

  c10::intrusive_ptr<c10d::Store> store_;
  const std::chrono::milliseconds timeout_;
  const std::string rank_table_; // see the constructor
  std::mutex mutex_;
  std::unordered_map<c10::DeviceIndex, DeviceComm> comms_;
  uint64_t comms_created_ = 0; // names the store key of the next root info
  uint64_t seq_ = 0;           // collectives launched (getSequenceNumberForGroup)
  bool coalescing_ = false;     // between startCoalescing() and endCoalescing()
  std::vector<PeerOp> coalesced_;
  // Note [Watchdog and heartbeat monitor]; stopped first when the group is
  // destroyed.
  std::unique_ptr<Watchdog> watchdog_;
};

} // namespace c10d_npu
