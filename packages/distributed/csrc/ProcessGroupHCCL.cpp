#include "ProcessGroupHCCL.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

#include "HcclTypes.h"
#include "npu/NPUCachingAllocator.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUGuardImpl.h"

namespace c10d_npu {
namespace {

const c10_npu::hccl::HcclApi& hccl() {
  return c10_npu::hccl::api();
}

// How a collective reaches a tensor's memory: HCCL reads or writes it in
// place (it must be contiguous), or the collective copies it through a
// packed buffer on the communicator stream (any strides do, as with gloo
// and NCCL: the list forms of all_gather's outputs, reduce_scatter's inputs
// and all_to_all's tensors).
enum class Access { InPlace, Copied };

void check_tensor(const at::Tensor& t, const char* what, Access access) {
  TORCH_CHECK_VALUE(
      t.device().type() == c10::DeviceType::PrivateUse1,
      "ProcessGroupHCCL: ", what, " must be npu tensors, got a tensor on ", t.device(),
      "; move it with .npu(), or use a gloo group for CPU tensors");
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "ProcessGroupHCCL: ", what,
                    " must be dense (strided) tensors, got layout ", t.layout());
  TORCH_CHECK_VALUE(access == Access::Copied || t.is_contiguous(t.suggest_memory_format()),
                    "ProcessGroupHCCL: ", what, " must be contiguous; call .contiguous() first");
}

void check_same_device(const std::vector<at::Tensor>& tensors, const char* what,
                       Access access = Access::InPlace) {
  TORCH_CHECK_VALUE(!tensors.empty(), "ProcessGroupHCCL: no ", what, " given");
  for (const auto& t : tensors) {
    check_tensor(t, what, access);
    TORCH_CHECK_VALUE(t.device() == tensors[0].device(), "ProcessGroupHCCL: all ", what,
                      " of one call must be on one device; got ", tensors[0].device(), " and ",
                      t.device());
  }
}

// HCCL reduces complex numbers only as pairs of reals, which is right for sums.
at::Tensor as_hccl_tensor(const at::Tensor& t, const c10d::ReduceOp* op) {
  if (!t.is_complex()) {
    return t;
  }
  TORCH_CHECK_VALUE(op == nullptr || op->op_ == c10d::ReduceOp::SUM ||
                        op->op_ == c10d::ReduceOp::AVG || op->op_ == c10d::ReduceOp::PREMUL_SUM,
                    "ProcessGroupHCCL: complex tensors can only be reduced by SUM, AVG or "
                    "PREMUL_SUM");
  return at::view_as_real(t);
}

// A requested reduction as HCCL runs it: HCCL has no average, so AVG is a
// SUM followed by a division on the communicator stream; nor PREMUL_SUM
// (torch's `_make_nccl_premul_sum(factor)`), which is a SUM of each rank's
// input multiplied by the factor first, in a temporary on that stream.
struct Reduction {
  explicit Reduction(const c10d::ReduceOp& op)
      : requested(op),
        average(op.op_ == c10d::ReduceOp::AVG),
        premultiply(op.op_ == c10d::ReduceOp::PREMUL_SUM),
        hccl(average || premultiply ? c10d::ReduceOp(c10d::ReduceOp::SUM) : op) {}

  // Refuses, before anything is queued, what cannot reduce tensors of
  // `type`: every reducing collective calls it for each of its dtypes, so
  // that all of them accept and refuse the same combinations, with the
  // same message (and no rank queues half a collective).
  void check(at::ScalarType type) const {
    hccl_reduce_op(hccl, type); // the ops HCCL has
    TORCH_CHECK_VALUE(!average || at::isFloatingType(type) || at::isComplexType(type),
                      "ProcessGroupHCCL: ReduceOp.AVG needs a floating-point or complex tensor, "
                      "got ", type, " (HCCL has no average: it is a sum and a division); "
                      "use SUM and divide, or convert the tensor to a floating-point dtype");
    TORCH_CHECK_VALUE(
        !at::isComplexType(type) || requested.op_ == c10d::ReduceOp::SUM || average || premultiply,
        "ProcessGroupHCCL: complex tensors can only be reduced by SUM, AVG or PREMUL_SUM");
    if (premultiply) {
      TORCH_CHECK_VALUE(at::isFloatingType(type) || at::isComplexType(type),
                        "ProcessGroupHCCL: ReduceOp.PREMUL_SUM needs a floating-point or complex "
                        "tensor, got ", type);
      // Complex tensors are summed as pairs of reals, each scaled by the factor.
      const at::Tensor& factor = supplement().tensor_factor;
      TORCH_CHECK_VALUE(!factor.defined() || (factor.numel() == 1 && !factor.is_complex()),
                        "ProcessGroupHCCL: the factor of ReduceOp.PREMUL_SUM must be one real "
                        "number, got a tensor of ", factor.numel(), " elements of dtype ",
                        factor.scalar_type());
    }
  }

  // What this rank contributes to the sum: `input` itself, or for
  // PREMUL_SUM a new tensor (on the current stream) of it times the factor.
  at::Tensor contribution(const at::Tensor& input) const {
    if (!premultiply) {
      return input;
    }
    const c10d::PreMulSumSupplement& factor = supplement();
    if (!factor.tensor_factor.defined()) {
      return input * factor.double_factor;
    }
    if (factor.tensor_factor.device().is_cpu()) {
      return input * factor.tensor_factor.item<double>();
    }
    // On the device: read on this (the communicator's) stream, after what
    // the caller queued (the collective waits for the caller's stream); the
    // allocator must not reuse its memory before then.
    c10_npu::NPUCachingAllocator::recordStream(factor.tensor_factor.storage().data_ptr(),
                                               c10_npu::getCurrentNPUStream());
    return input * factor.tensor_factor.reshape({});
  }

  c10d::ReduceOp requested;
  bool average;
  bool premultiply;
  c10d::ReduceOp hccl;

 private:
  const c10d::PreMulSumSupplement& supplement() const {
    const auto* factor =
        dynamic_cast<const c10d::PreMulSumSupplement*>(requested.supplement_.get());
    TORCH_CHECK_VALUE(factor != nullptr,
                      "ProcessGroupHCCL: ReduceOp.PREMUL_SUM without a factor; make the op with "
                      "torch.distributed._make_nccl_premul_sum(factor)");
    return *factor;
  }
};

void* address(const at::Tensor& t) {
  return t.data_ptr();
}

// acc = acc `op` x, elementwise, on the current stream.
void combine_into(at::Tensor& acc, const at::Tensor& x, HcclReduceOp op) {
  switch (op) {
    case HCCL_REDUCE_SUM: acc.add_(x); break;
    case HCCL_REDUCE_PROD: acc.mul_(x); break;
    case HCCL_REDUCE_MAX: at::maximum_out(acc, acc, x); break;
    case HCCL_REDUCE_MIN: at::minimum_out(acc, acc, x); break;
    default: TORCH_INTERNAL_ASSERT(false, "unexpected HcclReduceOp ", static_cast<int>(op));
  }
}

void check_rank(int rank, int size, const char* what) {
  TORCH_CHECK_VALUE(0 <= rank && rank < size, "ProcessGroupHCCL: ", what, " ", rank,
                    " is not a rank of this group of ", size, " ranks (0 to ", size - 1, ")");
}

// HCCL's counts and displacements (in elements of `t`, complex viewed as real)
// of the pieces of `t` along dim 0: `splits` rows each, or equal pieces when
// `splits` is empty.
void split_pieces(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                  const char* op, const char* what, std::vector<uint64_t>* counts,
                  std::vector<uint64_t>* displs) {
  TORCH_CHECK_VALUE(t.dim() >= 1, "ProcessGroupHCCL: ", op, " needs a ", what,
                    " of at least one dimension (it is split along dim 0)");
  const at::Tensor h = as_hccl_tensor(t, nullptr);
  const int64_t rows = t.size(0);
  const int64_t row = rows == 0 ? 0 : h.numel() / rows;
  std::vector<int64_t> pieces = splits;
  if (pieces.empty()) {
    TORCH_CHECK_VALUE(rows % size == 0, "ProcessGroupHCCL: ", op, " splits the ", what,
                      " evenly among the ", size, " ranks unless split sizes are given, but its "
                      "dim 0 (", rows, ") is not divisible by ", size);
    pieces.assign(size, rows / size);
  }
  TORCH_CHECK_VALUE(static_cast<int>(pieces.size()) == size, "ProcessGroupHCCL: ", op, ": the ",
                    what, " split sizes must have one entry per rank (", size, "), got ",
                    pieces.size());
  int64_t at = 0;
  counts->clear();
  displs->clear();
  for (const int64_t p : pieces) {
    TORCH_CHECK_VALUE(p >= 0, "ProcessGroupHCCL: ", op, ": the ", what,
                      " split sizes must not be negative, got ", p);
    counts->push_back(static_cast<uint64_t>(p * row));
    displs->push_back(static_cast<uint64_t>(at * row));
    at += p;
  }
  TORCH_CHECK_VALUE(at == rows, "ProcessGroupHCCL: ", op, ": the ", what,
                    " split sizes add up to ", at, ", but its dim 0 is ", rows);
}

// A positive number of seconds from the environment variable `name`, or
// nothing when it is unset or not such a number (HCCL then warns and uses
// its default).
std::optional<double> env_seconds(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') {
    return std::nullopt;
  }
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0)) {
    return std::nullopt;
  }
  return seconds;
}

// Note [HCCL timeouts]: how long a rank waits for the others to connect,
// and which limit that is.
std::pair<std::chrono::milliseconds, const char*> connect_timeout(
    std::chrono::milliseconds group_timeout) {
  const std::optional<double> env = env_seconds("HCCL_CONNECT_TIMEOUT");
  if (env && *env * 1000 < static_cast<double>(group_timeout.count())) {
    return {std::chrono::milliseconds(static_cast<int64_t>(std::ceil(*env * 1000))),
            "HCCL_CONNECT_TIMEOUT"};
  }
  return {group_timeout, "the process group's timeout"};
}

// Note [HCCL timeouts]: the communicator's hcclExecTimeOut, whole seconds.
int32_t exec_timeout_seconds(std::chrono::milliseconds group_timeout) {
  double seconds = static_cast<double>(group_timeout.count()) / 1000;
  if (const std::optional<double> env = env_seconds("HCCL_EXEC_TIMEOUT")) {
    seconds = std::min(seconds, *env);
  }
  return static_cast<int32_t>(std::clamp(std::ceil(seconds), 1.0, 2147483647.0));
}

} // namespace

MemoryReuse memory_reuse_mode() {
  static const MemoryReuse mode = [] {
    const char* text = std::getenv("MULTI_STREAM_MEMORY_REUSE");
    const std::string value = text == nullptr ? "" : text;
    if (value.empty() || value == "1") {
      return MemoryReuse::EraseAtWait;
    }
    if (value == "0") {
      return MemoryReuse::RecordStream;
    }
    TORCH_CHECK(value == "2", "MULTI_STREAM_MEMORY_REUSE='", value,
                "' is not valid: use 0 (record_stream only), 1 (the default: Work.wait() erases "
                "the communicator stream's use) or 2 (the work holds its tensors until "
                "Work.wait())");
    return MemoryReuse::HoldUntilWait;
  }();
  return mode;
}

// ---------------------------------------------------------------------------
// WorkHCCL

ProcessGroupHCCL::WorkHCCL::WorkHCCL(int rank, c10d::OpType type, const char* profiling_title,
                                     c10::Device device, std::vector<at::Tensor> outputs,
                                     bool host_waits)
    : c10d::Work(rank, type, profiling_title),
      device_(device),
      outputs_(std::move(outputs)),
      host_waits_(host_waits) {}

ProcessGroupHCCL::WorkHCCL::~WorkHCCL() {
  try {
    release_memory_uses(nullptr);
  } catch (const std::exception& e) {
    TORCH_WARN("ProcessGroupHCCL: releasing a collective's tensors failed: ", e.what());
  }
}

void ProcessGroupHCCL::WorkHCCL::release_memory_uses(const c10_npu::NPUStream* waiting) {
  for (const auto& weak : recorded_) {
    c10::intrusive_ptr<c10::StorageImpl> storage = weak.lock();
    if (storage && waiting != nullptr &&
        c10_npu::NPUCachingAllocator::isAllocatedOn(storage->data_ptr(), *waiting)) {
      c10_npu::NPUCachingAllocator::eraseStream(storage->data_ptr(), *comm_stream_);
    }
  }
  recorded_.clear();
  for (const auto& storage : held_) {
    if (waiting == nullptr ||
        !c10_npu::NPUCachingAllocator::isAllocatedOn(storage.data_ptr(), *waiting)) {
      c10_npu::NPUCachingAllocator::recordStream(storage.data_ptr(), *comm_stream_);
    }
  }
  held_.clear();
}

bool ProcessGroupHCCL::WorkHCCL::isCompleted() {
  return end_.query();
}

bool ProcessGroupHCCL::WorkHCCL::wait(std::chrono::milliseconds /*timeout*/) {
  synchronize();
  if (host_waits_) {
    end_.synchronize();
  }
  return true;
}

void ProcessGroupHCCL::WorkHCCL::synchronize() {
  const c10_npu::NPUStream waiting = c10_npu::getCurrentNPUStream(device_.index());
  end_.block(waiting);
  release_memory_uses(&waiting);
}

std::vector<at::Tensor> ProcessGroupHCCL::WorkHCCL::result() {
  return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> ProcessGroupHCCL::WorkHCCL::getFuture() {
  return future_;
}

// ---------------------------------------------------------------------------
// ProcessGroupHCCL

ProcessGroupHCCL::ProcessGroupHCCL(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                   std::chrono::milliseconds timeout, std::string rank_table)
    : c10d::Backend(rank, size), store_(std::move(store)), timeout_(timeout), rank_table_(std::move(rank_table)) {
  TORCH_CHECK_VALUE(timeout_.count() > 0, "ProcessGroupHCCL: the timeout must be positive, got ",
                    timeout_.count(), " ms");
  // Fail here, with instructions, rather than at the first collective.
  hccl();
  memory_reuse_mode();
  watchdog_ = std::make_unique<Watchdog>(rank);
}

ProcessGroupHCCL::~ProcessGroupHCCL() {
  watchdog_.reset(); // it watches the communicators destroyed below
  std::lock_guard<std::mutex> lock(mutex_);
  destroy_communicators("before the group was destroyed");
}

void ProcessGroupHCCL::destroy_communicators(const std::string& when) {
  for (auto& [device, dc] : comms_) {
    if (watchdog_) {
      watchdog_->unwatch(dc.comm);
    }
    try {
      // Queued collectives still use the communicator; each ends within the
      // group's timeout (Note [HCCL timeouts]).
      dc.stream.synchronize();
    } catch (const c10::Error& e) {
      TORCH_WARN("ProcessGroupHCCL: a collective on npu:", static_cast<int>(device), " failed ",
                 when, ": ", e.what_without_backtrace());
    } catch (const std::exception& e) {
      TORCH_WARN("ProcessGroupHCCL: a collective on npu:", static_cast<int>(device), " failed ",
                 when, ": ", e.what());
    }
    hccl().HcclCommDestroy(dc.comm);
  }
  comms_.clear();
}

void ProcessGroupHCCL::rebuild_communicators(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  destroy_communicators("before " + reason + " rebuilt the group's communicators");
}

void ProcessGroupHCCL::check_communicator_usable(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = comms_.find(device);
  if (it == comms_.end()) {
    return;
  }
  HcclResult error = HCCL_SUCCESS;
  check_hccl(hccl().HcclGetCommAsyncError(it->second.comm, &error), "HcclGetCommAsyncError");
  if (error != HCCL_SUCCESS) {
    C10_THROW_ERROR(DistBackendError,
                    c10::str("ProcessGroupHCCL: rank ", getRank(), "'s hccl communicator of npu:",
                             static_cast<int>(device), " has failed (", c10_npu::hccl::describe_error(error),
                             ") and cannot be resumed: call "
                             "torch_npu.distributed.reinit_process_group(group) on every rank "
                             "(rebuild_link=True, the default) to create new communicators, or "
                             "destroy the process group"));
  }
}

void ProcessGroupHCCL::check_bound_device(c10::Device device) const {
  const std::optional<c10::Device> bound = getBoundDeviceId();
  TORCH_CHECK_VALUE(
      !bound.has_value() || bound->type() != c10::DeviceType::PrivateUse1 || *bound == device,
      "ProcessGroupHCCL: rank ", getRank(), " got a collective on ", device,
      ", but its group is bound to ", *bound, " (init_process_group(device_id=...)): call "
      "torch.npu.set_device(", *bound, ") before the first collective (object collectives such "
      "as all_gather_object put their bytes on the current device), or move the tensors to ",
      *bound);
}

ProcessGroupHCCL::DeviceComm& ProcessGroupHCCL::device_comm(c10::Device device) {
  check_bound_device(device);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = comms_.find(device.index());
  if (it != comms_.end()) {
    return it->second;
  }
  if (!comms_.empty()) {
    // Note [One device per rank]: said now, since a move of this rank alone
    // hangs until the timeout.
    TORCH_WARN("ProcessGroupHCCL: rank ", getRank(), " runs a collective on ", device,
               " after collectives of this group on npu:",
               static_cast<int>(comms_.begin()->first), "; every rank must move to another "
               "device at the same collective, or this one waits for the others until the "
               "group's timeout. If this rank called torch.npu.set_device after a collective "
               "(object collectives such as all_gather_object run on the current device), call "
               "it before the first collective, or pass device_id to init_process_group");
  }
  wait_for_all_ranks(comms_created_, device);
  // HCCL binds a communicator to the calling thread's current device.
  c10_npu::NPUGuard guard(device);
  HcclCommConfig config = c10_npu::hccl::default_comm_config();
  config.hcclExecTimeOut = exec_timeout_seconds(timeout_);
  if (!rank_table_.empty() && comms_created_ == 0) {
    ++comms_created_;
    HcclComm comm = nullptr;
    check_hccl(hccl().HcclCommInitClusterInfoConfig(rank_table_.c_str(), static_cast<uint32_t>(getRank()),
                                                    &config, &comm),
               "HcclCommInitClusterInfoConfig");
    uint32_t ranks = 0;
    check_hccl(hccl().HcclGetRankSize(comm, &ranks), "HcclGetRankSize");
    if (static_cast<int>(ranks) != getSize()) {
      hccl().HcclCommDestroy(comm);
      TORCH_CHECK_VALUE(false, "ProcessGroupHCCL: the rank table '", rank_table_, "' (RANK_TABLE_FILE) lists ",
                        ranks, " ranks, but the process group has ", getSize(),
                        ": make the table list every rank of the job, or unset RANK_TABLE_FILE");
    }
    auto [inserted, _] = comms_.emplace(
        device.index(), DeviceComm{comm, c10_npu::getStreamFromPool(false, device.index())});
    watchdog_->watch(comm, device);
    return inserted->second;
  }
  HcclRootInfo root{};
  const uint64_t index = comms_created_++;
  const std::string key = "hccl_root_info/" + std::to_string(index);
  if (getRank() == 0) {
    check_hccl(hccl().HcclGetRootInfo(&root), "HcclGetRootInfo");
    const auto* bytes = reinterpret_cast<const uint8_t*>(root.internal);
    store_->set(key, std::vector<uint8_t>(bytes, bytes + sizeof root.internal));
  } else {
    const std::vector<uint8_t> bytes = store_->get(key);
    TORCH_CHECK(bytes.size() == sizeof root.internal,
                "ProcessGroupHCCL: the root info in the store under '", key, "' has ",
                bytes.size(), " bytes instead of ", sizeof root.internal,
                "; is another program using the same store?");
    std::memcpy(root.internal, bytes.data(), bytes.size());
  }
  HcclComm comm = nullptr;
  check_hccl(hccl().HcclCommInitRootInfoConfig(static_cast<uint32_t>(getSize()), &root,
                                               static_cast<uint32_t>(getRank()), &config, &comm),
             "HcclCommInitRootInfoConfig");
  auto [inserted, _] = comms_.emplace(
      device.index(), DeviceComm{comm, c10_npu::getStreamFromPool(false, device.index())});
  watchdog_->watch(comm, device);
  return inserted->second;
}

void ProcessGroupHCCL::wait_for_all_ranks(uint64_t index, c10::Device device) {
  const std::string prefix = "hccl_joined/" + std::to_string(index) + "/";
  store_->set(prefix + std::to_string(getRank()), std::vector<uint8_t>{1});
  std::vector<std::string> keys;
  for (int r = 0; r < getSize(); ++r) {
    keys.push_back(prefix + std::to_string(r));
  }
  const auto [limit, origin] = connect_timeout(timeout_);
  try {
    store_->wait(keys, limit);
  } catch (const c10::Error&) { // stores report a timeout as DistStoreError or plain Error
    std::string missing;
    for (int r = 0; r < getSize(); ++r) {
      if (!store_->check({keys[r]})) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    if (missing.empty()) {
      throw; // not a timeout: the store's own error says what went wrong
    }
    // Note [One device per rank]
    std::string moved;
    for (const auto& [other, dc] : comms_) {
      moved += (moved.empty() ? ". This rank's earlier collectives of the group ran on npu:"
                              : ", npu:") + std::to_string(other);
    }
    if (!moved.empty()) {
      moved += ": if the other ranks stayed on their device, call torch.npu.set_device before "
               "the first collective (object collectives such as all_gather_object run on the "
               "current device)";
    }
    C10_THROW_ERROR(DistBackendError,
                    c10::str("ProcessGroupHCCL: rank(s) ", missing, " of ", getSize(),
                             " did not arrive within ", limit.count(), " ms (", origin,
                             ") to create the hccl communicator of ", device, " for rank ",
                             getRank(), "'s first collective on it: every rank must call the "
                             "same collectives in the same order", moved));
  }
}

template <typename Launch>
c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::collective(
    const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs, c10d::OpType type,
    const char* name, Launch launch, bool host_waits) {
  // Running it now would put it before the point-to-point operations
  // collected so far, and it cannot join their HcclBatchSendRecv.
  TORCH_CHECK_VALUE(!coalescing_, "ProcessGroupHCCL: ", name,
                    " was called while send/recv operations are being coalesced "
                    "(batch_isend_irecv or _coalescing_manager with a device); hccl coalesces "
                    "only send and recv: call it outside the coalescing block");
  // Before counting it: a refused collective is not one of the group's.
  check_bound_device(inputs[0].device());
  if (type != c10d::OpType::SEND && type != c10d::OpType::RECV) {
    ++seq_;
  }
  return launch_work(inputs, std::move(outputs), type, name, std::move(launch), host_waits);
}

template <typename Launch>
c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::launch_work(
    const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs, c10d::OpType type,
    const char* name, Launch launch, bool host_waits) {
  const c10::Device device = inputs[0].device();
  DeviceComm& dc = device_comm(device);
  c10_npu::NPUGuard device_guard(device);

  // The inputs may still be being written by work the caller queued.
  c10_npu::NPUEvent ready;
  ready.record(c10_npu::getCurrentNPUStream(device.index()));
  ready.block(dc.stream);

  // Note [Multi-stream memory reuse].
  auto work = c10::make_intrusive<WorkHCCL>(getRank(), type, name, device, outputs, host_waits);
  work->reuse_ = memory_reuse_mode();
  work->comm_stream_ = dc.stream;
  for (const std::vector<at::Tensor>* tensors : {&inputs, &std::as_const(outputs)}) {
    for (const auto& t : *tensors) {
      switch (work->reuse_) {
        case MemoryReuse::EraseAtWait:
          work->recorded_.push_back(t.storage().getWeakStorageImpl());
          [[fallthrough]];
        case MemoryReuse::RecordStream:
          c10_npu::NPUCachingAllocator::recordStream(t.storage().data_ptr(), dc.stream);
          break;
        case MemoryReuse::HoldUntilWait:
          work->held_.push_back(t.storage());
          break;
      }
    }
  }
  {
    // Work launch() queues besides the collective (copies, a division)
    // goes on the communicator stream too.
    c10_npu::NPUStreamGuard stream_guard(dc.stream.unwrap());
    launch(dc.comm, dc.stream.stream());
    work->end_.record(dc.stream);
    work->future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{device});
    // Completed now, with events on the communicator stream: whoever waits
    // on the future waits for the collective on the device.
    work->future_->markCompleted(at::IValue(work->outputs_));
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  check_same_device(tensors, "broadcast tensors");
  TORCH_CHECK_VALUE(tensors.size() == 1, "ProcessGroupHCCL: broadcast takes one tensor per process");
  const auto root = static_cast<uint32_t>(opts.rootRank);
  return collective(tensors, tensors, c10d::OpType::BROADCAST, "hccl:broadcast",
                    [&](HcclComm comm, aclrtStream stream) {
                      at::Tensor t = as_hccl_tensor(tensors[0], nullptr);
                      check_hccl(hccl().HcclBroadcast(address(t), t.numel(),
                                                      hccl_data_type(t.scalar_type()), root,
                                                      comm, stream),
                                 "HcclBroadcast");
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  c10d::AllreduceCoalescedOptions coalesced;
  coalesced.reduceOp = opts.reduceOp;
  coalesced.timeout = opts.timeout;
  TORCH_CHECK_VALUE(tensors.size() == 1, "ProcessGroupHCCL: allreduce takes one tensor per process");
  return allreduce_coalesced(tensors, coalesced);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  check_same_device(tensors, "allreduce tensors");
  const Reduction reduction(opts.reduceOp);
  const c10d::ReduceOp& op = reduction.requested;
  const c10d::ReduceOp& hccl_op = reduction.hccl;
  const bool average = reduction.average;
  for (const auto& t : tensors) {
    reduction.check(t.scalar_type());
  }
  return collective(
      tensors, tensors, c10d::OpType::ALLREDUCE, "hccl:all_reduce",
      [&](HcclComm comm, aclrtStream stream) {
        for (auto& tensor : tensors) {
          at::Tensor t = as_hccl_tensor(tensor, &op);
          const at::Tensor send = reduction.contribution(t);
          check_hccl(hccl().HcclAllReduce(address(send), address(t), t.numel(),
                                          hccl_data_type(t.scalar_type()),
                                          hccl_reduce_op(hccl_op, t.scalar_type()), comm, stream),
                     "HcclAllReduce");
          if (average) {
            // HCCL has no average: a sum, then a division on the same stream.
            tensor.div_(getSize());
          }
        }
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  check_same_device(tensors, "reduce tensors");
  TORCH_CHECK_VALUE(tensors.size() == 1, "ProcessGroupHCCL: reduce takes one tensor per process");
  const Reduction reduction(opts.reduceOp);
  const c10d::ReduceOp& op = reduction.requested;
  const c10d::ReduceOp& hccl_op = reduction.hccl;
  const bool average = reduction.average;
  reduction.check(tensors[0].scalar_type());
  const auto root = static_cast<uint32_t>(opts.rootRank);
  const bool is_root = opts.rootRank == getRank();
  return collective(tensors, tensors, c10d::OpType::REDUCE, "hccl:reduce",
                    [&](HcclComm comm, aclrtStream stream) {
                      at::Tensor t = as_hccl_tensor(tensors[0], &op);
                      const at::Tensor send = reduction.contribution(t);
                      check_hccl(hccl().HcclReduce(address(send), address(t), t.numel(),
                                                   hccl_data_type(t.scalar_type()),
                                                   hccl_reduce_op(hccl_op, t.scalar_type()),
                                                   root, comm, stream),
                                 "HcclReduce");
                      if (average && is_root) {
                        tensors[0].div_(getSize());
                      }
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> outputs{output};
  std::vector<at::Tensor> inputs{input};
  return allgather_into_tensor_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  check_same_device(inputs, "allgather inputs");
  check_same_device(outputs, "allgather outputs");
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "ProcessGroupHCCL: allgather got ",
                    inputs.size(), " inputs but ", outputs.size(), " outputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK_VALUE(outputs[i].scalar_type() == inputs[i].scalar_type(),
                      "ProcessGroupHCCL: allgather output and input dtypes differ (",
                      outputs[i].scalar_type(), " vs ", inputs[i].scalar_type(), ")");
    TORCH_CHECK_VALUE(outputs[i].numel() == inputs[i].numel() * getSize(),
                      "ProcessGroupHCCL: the allgather output must have world size (",
                      getSize(), ") times the input's elements; got ", outputs[i].numel(),
                      " for an input of ", inputs[i].numel());
  }
  return collective(inputs, outputs, c10d::OpType::_ALLGATHER_BASE, "hccl:all_gather_into_tensor",
                    [&](HcclComm comm, aclrtStream stream) {
                      for (size_t i = 0; i < inputs.size(); ++i) {
                        at::Tensor in = as_hccl_tensor(inputs[i], nullptr);
                        at::Tensor out = as_hccl_tensor(outputs[i], nullptr);
                        check_hccl(hccl().HcclAllGather(address(in), address(out), in.numel(),
                                                        hccl_data_type(in.scalar_type()), comm,
                                                        stream),
                                   "HcclAllGather");
                      }
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  check_same_device(inputs, "allgather inputs");
  TORCH_CHECK_VALUE(inputs.size() == 1 && outputs.size() == 1,
                    "ProcessGroupHCCL: allgather takes one tensor (and one output list) per process");
  const at::Tensor& input = inputs[0];
  std::vector<at::Tensor>& targets = outputs[0];
  TORCH_CHECK_VALUE(targets.size() == static_cast<size_t>(getSize()),
                    "ProcessGroupHCCL: allgather needs one output tensor per rank (", getSize(),
                    "), got ", targets.size());
  check_same_device(targets, "allgather outputs", Access::Copied);
  for (const auto& t : targets) {
    TORCH_CHECK_VALUE(t.numel() == input.numel() && t.scalar_type() == input.scalar_type(),
                      "ProcessGroupHCCL: every allgather output must match the input's size "
                      "and dtype");
  }
  return collective(inputs, targets, c10d::OpType::ALLGATHER, "hccl:all_gather",
                    [&](HcclComm comm, aclrtStream stream) {
                      // Gathered into one buffer, then copied out, all on this stream.
                      at::Tensor in = as_hccl_tensor(input, nullptr).contiguous();
                      at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
                      check_hccl(hccl().HcclAllGather(address(in), address(flat), in.numel(),
                                                      hccl_data_type(in.scalar_type()), comm,
                                                      stream),
                                 "HcclAllGather");
                      for (int r = 0; r < getSize(); ++r) {
                        at::Tensor target = as_hccl_tensor(targets[r], nullptr);
                        target.copy_(flat.narrow(0, r * in.numel(), in.numel()).view_as(target));
                      }
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outputs{output};
  std::vector<at::Tensor> inputs{input};
  return reduce_scatter_tensor_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  check_same_device(inputs, "reduce_scatter inputs");
  check_same_device(outputs, "reduce_scatter outputs");
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "ProcessGroupHCCL: reduce_scatter got ",
                    inputs.size(), " inputs but ", outputs.size(), " outputs");
  const Reduction reduction(opts.reduceOp);
  const c10d::ReduceOp& op = reduction.requested;
  const c10d::ReduceOp& hccl_op = reduction.hccl;
  const bool average = reduction.average;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK_VALUE(inputs[i].numel() == outputs[i].numel() * getSize() &&
                          inputs[i].scalar_type() == outputs[i].scalar_type(),
                      "ProcessGroupHCCL: the reduce_scatter input must have world size (",
                      getSize(), ") times the output's elements, of the same dtype; got ",
                      inputs[i].numel(), " and ", outputs[i].numel());
    reduction.check(inputs[i].scalar_type());
  }
  return collective(inputs, outputs, c10d::OpType::_REDUCE_SCATTER_BASE,
                    "hccl:reduce_scatter_tensor", [&](HcclComm comm, aclrtStream stream) {
                      for (size_t i = 0; i < inputs.size(); ++i) {
                        at::Tensor in = reduction.contribution(as_hccl_tensor(inputs[i], &op));
                        at::Tensor out = as_hccl_tensor(outputs[i], &op);
                        check_hccl(hccl().HcclReduceScatter(
                                       address(in), address(out), out.numel(),
                                       hccl_data_type(in.scalar_type()),
                                       hccl_reduce_op(hccl_op, in.scalar_type()), comm, stream),
                                   "HcclReduceScatter");
                        if (average) {
                          outputs[i].div_(getSize());
                        }
                      }
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == 1 && inputs.size() == 1,
                    "ProcessGroupHCCL: reduce_scatter takes one output (and one input list) "
                    "per process");
  std::vector<at::Tensor>& sources = inputs[0];
  TORCH_CHECK_VALUE(sources.size() == static_cast<size_t>(getSize()),
                    "ProcessGroupHCCL: reduce_scatter needs one input tensor per rank (",
                    getSize(), "), got ", sources.size());
  check_same_device(sources, "reduce_scatter inputs", Access::Copied);
  check_same_device(outputs, "reduce_scatter outputs");
  for (const auto& t : sources) {
    TORCH_CHECK_VALUE(t.numel() == outputs[0].numel() && t.scalar_type() == outputs[0].scalar_type(),
                      "ProcessGroupHCCL: every reduce_scatter input must match the output's "
                      "size and dtype");
  }
  const Reduction reduction(opts.reduceOp);
  const c10d::ReduceOp& op = reduction.requested;
  const c10d::ReduceOp& hccl_op = reduction.hccl;
  const bool average = reduction.average;
  reduction.check(outputs[0].scalar_type());
  return collective(sources, outputs, c10d::OpType::REDUCE_SCATTER, "hccl:reduce_scatter",
                    [&](HcclComm comm, aclrtStream stream) {
                      // The inputs, packed into one buffer on this stream first.
                      at::Tensor out = as_hccl_tensor(outputs[0], &op);
                      at::Tensor flat = at::empty({getSize() * out.numel()}, out.options());
                      for (int r = 0; r < getSize(); ++r) {
                        flat.narrow(0, r * out.numel(), out.numel())
                            .copy_(as_hccl_tensor(sources[r], &op).reshape({-1}));
                      }
                      const at::Tensor send = reduction.contribution(flat);
                      check_hccl(hccl().HcclReduceScatter(
                                     address(send), address(out), out.numel(),
                                     hccl_data_type(out.scalar_type()),
                                     hccl_reduce_op(hccl_op, out.scalar_type()), comm, stream),
                                 "HcclReduceScatter");
                      if (average) {
                        outputs[0].div_(getSize());
                      }
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::barrier(const c10d::BarrierOptions& opts) {
  c10::DeviceIndex index = -1;
  if (opts.device.has_value() && opts.device->type() == c10::DeviceType::PrivateUse1) {
    index = opts.device->index();
  } else if (!opts.device_ids.empty()) {
    index = static_cast<c10::DeviceIndex>(opts.device_ids[0]);
  } else {
    index = c10_npu::current_device();
  }
  // A placeholder that names the device; HCCL's barrier carries no data.
  std::vector<at::Tensor> placeholder{
      at::empty({0}, at::TensorOptions().device(c10::DeviceType::PrivateUse1, index))};
  return collective(placeholder, {}, c10d::OpType::BARRIER, "hccl:barrier",
                    [&](HcclComm comm, aclrtStream stream) {
                      check_hccl(hccl().HcclBarrier(comm, stream), "HcclBarrier");
                    },
                    /*host_waits=*/true);
}

// ---------------------------------------------------------------------------
// All-to-all

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplitSizes,
    std::vector<int64_t>& inputSplitSizes, const c10d::AllToAllOptions& /*opts*/) {
  check_same_device({input, output}, "all_to_all tensors");
  TORCH_CHECK_VALUE(input.scalar_type() == output.scalar_type(),
                    "ProcessGroupHCCL: all_to_all input and output dtypes differ (",
                    input.scalar_type(), " vs ", output.scalar_type(), ")");
  TORCH_CHECK_VALUE(!inputSplitSizes.empty() || !outputSplitSizes.empty() ||
                        input.numel() == output.numel(),
                    "ProcessGroupHCCL: all_to_all_single without split sizes needs input and "
                    "output of the same number of elements; got ", input.numel(), " and ",
                    output.numel());
  std::vector<uint64_t> send_counts, send_displs, recv_counts, recv_displs;
  split_pieces(input, inputSplitSizes, getSize(), "all_to_all_single", "input", &send_counts,
               &send_displs);
  split_pieces(output, outputSplitSizes, getSize(), "all_to_all_single", "output", &recv_counts,
               &recv_displs);
  const HcclDataType type = hccl_data_type(as_hccl_tensor(input, nullptr).scalar_type());
  const bool even = inputSplitSizes.empty() && outputSplitSizes.empty();
  std::vector<at::Tensor> inputs{input};
  return collective(inputs, {output}, c10d::OpType::ALLTOALL_BASE, "hccl:all_to_all_single",
                    [&](HcclComm comm, aclrtStream stream) {
                      if (even) {
                        check_hccl(hccl().HcclAlltoAll(address(input), send_counts[0], type,
                                                       address(output), recv_counts[0], type,
                                                       comm, stream),
                                   "HcclAlltoAll");
                      } else {
                        check_hccl(hccl().HcclAlltoAllV(
                                       address(input), send_counts.data(), send_displs.data(),
                                       type, address(output), recv_counts.data(),
                                       recv_displs.data(), type, comm, stream),
                                   "HcclAlltoAllV");
                      }
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& /*opts*/) {
  TORCH_CHECK_VALUE(inputs.size() == static_cast<size_t>(getSize()) &&
                        outputs.size() == static_cast<size_t>(getSize()),
                    "ProcessGroupHCCL: all_to_all needs one input and one output tensor per "
                    "rank (", getSize(), "), got ", inputs.size(), " and ", outputs.size());
  check_same_device(inputs, "all_to_all inputs", Access::Copied);
  check_same_device(outputs, "all_to_all outputs", Access::Copied);
  TORCH_CHECK_VALUE(inputs[0].device() == outputs[0].device(),
                    "ProcessGroupHCCL: all_to_all inputs and outputs must be on one device; got ",
                    inputs[0].device(), " and ", outputs[0].device());
  const at::ScalarType dtype = inputs[0].scalar_type();
  for (const auto* list : {&inputs, &outputs}) {
    for (const auto& t : *list) {
      TORCH_CHECK_VALUE(t.scalar_type() == dtype, "ProcessGroupHCCL: all_to_all tensors must "
                        "all have one dtype; got ", dtype, " and ", t.scalar_type());
    }
  }
  // Packed into one buffer each way; counts in elements of the HCCL view.
  std::vector<uint64_t> send_counts, send_displs, recv_counts, recv_displs;
  uint64_t send_total = 0;
  uint64_t recv_total = 0;
  for (int r = 0; r < getSize(); ++r) {
    const auto in = static_cast<uint64_t>(as_hccl_tensor(inputs[r], nullptr).numel());
    const auto out = static_cast<uint64_t>(as_hccl_tensor(outputs[r], nullptr).numel());
    send_counts.push_back(in);
    send_displs.push_back(send_total);
    recv_counts.push_back(out);
    recv_displs.push_back(recv_total);
    send_total += in;
    recv_total += out;
  }
  const HcclDataType type = hccl_data_type(as_hccl_tensor(inputs[0], nullptr).scalar_type());
  return collective(inputs, outputs, c10d::OpType::ALLTOALL, "hccl:all_to_all",
                    [&](HcclComm comm, aclrtStream stream) {
                      const at::Tensor first = as_hccl_tensor(inputs[0], nullptr);
                      at::Tensor send = at::empty({static_cast<int64_t>(send_total)},
                                                  first.options());
                      at::Tensor recv = at::empty({static_cast<int64_t>(recv_total)},
                                                  first.options());
                      for (int r = 0; r < getSize(); ++r) {
                        send.narrow(0, send_displs[r], send_counts[r])
                            .copy_(as_hccl_tensor(inputs[r], nullptr).reshape({-1}));
                      }
                      check_hccl(hccl().HcclAlltoAllV(address(send), send_counts.data(),
                                                      send_displs.data(), type, address(recv),
                                                      recv_counts.data(), recv_displs.data(),
                                                      type, comm, stream),
                                 "HcclAlltoAllV");
                      for (int r = 0; r < getSize(); ++r) {
                        at::Tensor target = as_hccl_tensor(outputs[r], nullptr);
                        target.copy_(recv.narrow(0, recv_displs[r], recv_counts[r])
                                         .view(target.sizes()));
                      }
                    });
}

// ---------------------------------------------------------------------------
// Point-to-point

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::point_to_point(std::vector<at::Tensor>& tensors,
                                                                int peer, bool send) {
  const char* what = send ? "send tensors" : "recv tensors";
  check_same_device(tensors, what);
  TORCH_CHECK_VALUE(tensors.size() == 1, "ProcessGroupHCCL: ", send ? "send" : "recv",
                    " takes one tensor");
  check_rank(peer, getSize(), send ? "send destination" : "recv source");
  TORCH_CHECK_VALUE(peer != getRank(), "ProcessGroupHCCL: rank ", getRank(), " cannot ",
                    send ? "send to" : "receive from", " itself outside batch_isend_irecv");
  hccl_data_type(as_hccl_tensor(tensors[0], nullptr).scalar_type()); // refuses what HCCL cannot carry
  if (coalescing_) {
    coalesced_.push_back(PeerOp{send, peer, tensors[0]});
    return nullptr; // endCoalescing() returns the work of the whole batch
  }
  const auto peer_rank = static_cast<uint32_t>(peer);
  const at::Tensor tensor = tensors[0];
  std::vector<at::Tensor> outputs;
  if (!send) {
    outputs.push_back(tensor);
  }
  return collective(tensors, outputs, send ? c10d::OpType::SEND : c10d::OpType::RECV,
                    send ? "hccl:send" : "hccl:recv", [&](HcclComm comm, aclrtStream stream) {
                      at::Tensor t = as_hccl_tensor(tensor, nullptr);
                      const HcclDataType type = hccl_data_type(t.scalar_type());
                      if (send) {
                        check_hccl(hccl().HcclSend(address(t), t.numel(), type, peer_rank, comm,
                                                   stream),
                                   "HcclSend");
                      } else {
                        check_hccl(hccl().HcclRecv(address(t), t.numel(), type, peer_rank, comm,
                                                   stream),
                                   "HcclRecv");
                      }
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::send(std::vector<at::Tensor>& tensors,
                                                      int dstRank, int /*tag*/) {
  return point_to_point(tensors, dstRank, /*send=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recv(std::vector<at::Tensor>& tensors,
                                                      int srcRank, int /*tag*/) {
  return point_to_point(tensors, srcRank, /*send=*/false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recvAnysource(
    std::vector<at::Tensor>& /*tensors*/, int /*tag*/) {
  TORCH_CHECK_VALUE(false, "ProcessGroupHCCL: HCCL cannot receive from any source; name the "
                    "sending rank (dist.recv(tensor, src=...)), or send its rank first with "
                    "a collective");
}

void ProcessGroupHCCL::startCoalescing() {
  // torch's _coalescing_manager does not end coalescing when its block
  // raises: a new block starts afresh rather than leaving the group stuck.
  if (coalescing_ && !coalesced_.empty()) {
    TORCH_WARN("ProcessGroupHCCL: ", coalesced_.size(),
               " send/recv operation(s) of a coalescing block that did not end (an exception "
               "inside it?) are dropped");
  }
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::endCoalescing() {
  TORCH_CHECK_VALUE(coalescing_, "ProcessGroupHCCL: endCoalescing without startCoalescing");
  coalescing_ = false;
  std::vector<PeerOp> ops = std::move(coalesced_);
  coalesced_.clear();
  if (ops.empty()) {
    // Nothing was collected (the collectives of a _coalescing_manager block
    // took torch's fast path): a work that is already done.
    auto work = c10::make_intrusive<WorkHCCL>(getRank(), c10d::OpType::COALESCED,
                                              "hccl:coalesced", c10::Device(
                                                  c10::DeviceType::PrivateUse1,
                                                  c10_npu::current_device()),
                                              std::vector<at::Tensor>{}, false);
    work->end_.record(c10_npu::getCurrentNPUStream(work->device_.index()));
    work->future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{work->device_});
    work->future_->markCompleted(at::IValue(work->outputs_));
    return work;
  }
  std::vector<at::Tensor> tensors;
  std::vector<at::Tensor> received;
  for (const PeerOp& op : ops) {
    TORCH_CHECK_VALUE(op.tensor.device() == ops[0].tensor.device(),
                      "ProcessGroupHCCL: the tensors of one batch_isend_irecv must be on one "
                      "device; got ", ops[0].tensor.device(), " and ", op.tensor.device());
    tensors.push_back(op.tensor);
    if (!op.send) {
      received.push_back(op.tensor);
    }
  }
  return launch_work(tensors, received, c10d::OpType::COALESCED, "hccl:batch_isend_irecv",
                     [&](HcclComm comm, aclrtStream stream) {
                       std::vector<HcclSendRecvItem> items;
                       for (const PeerOp& op : ops) {
                         at::Tensor t = as_hccl_tensor(op.tensor, nullptr);
                         items.push_back(HcclSendRecvItem{
                             op.send ? HCCL_SEND : HCCL_RECV, address(t),
                             static_cast<uint64_t>(t.numel()), hccl_data_type(t.scalar_type()),
                             static_cast<uint32_t>(op.peer)});
                       }
                       check_hccl(hccl().HcclBatchSendRecv(items.data(),
                                                           static_cast<uint32_t>(items.size()),
                                                           comm, stream),
                                  "HcclBatchSendRecv");
                     },
                     /*host_waits=*/false);
}

// ---------------------------------------------------------------------------
// gather and scatter

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  check_same_device(inputs, "gather inputs");
  TORCH_CHECK_VALUE(inputs.size() == 1, "ProcessGroupHCCL: gather takes one tensor per process");
  check_rank(static_cast<int>(opts.rootRank), getSize(), "gather root");
  const int root = static_cast<int>(opts.rootRank);
  const at::Tensor input = inputs[0];
  std::vector<at::Tensor> targets;
  if (getRank() == root) {
    TORCH_CHECK_VALUE(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(getSize()),
                      "ProcessGroupHCCL: the gather root needs one output tensor per rank (",
                      getSize(), ")");
    targets = outputs[0];
    check_same_device(targets, "gather outputs");
    for (const auto& t : targets) {
      TORCH_CHECK_VALUE(t.numel() == input.numel() && t.scalar_type() == input.scalar_type(),
                        "ProcessGroupHCCL: every gather output must match the input's size and "
                        "dtype");
    }
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                      "ProcessGroupHCCL: only the gather root (rank ", root,
                      ") takes output tensors");
  }
  hccl_data_type(as_hccl_tensor(input, nullptr).scalar_type());
  const bool is_root = getRank() == root;
  return collective(inputs, targets, c10d::OpType::GATHER, "hccl:gather",
                    [&](HcclComm comm, aclrtStream stream) {
                      at::Tensor in = as_hccl_tensor(input, nullptr);
                      const HcclDataType type = hccl_data_type(in.scalar_type());
                      if (!is_root) {
                        check_hccl(hccl().HcclSend(address(in), in.numel(), type,
                                                   static_cast<uint32_t>(root), comm, stream),
                                   "HcclSend");
                        return;
                      }
                      std::vector<HcclSendRecvItem> items;
                      for (int r = 0; r < getSize(); ++r) {
                        at::Tensor target = as_hccl_tensor(targets[r], nullptr);
                        if (r == root) {
                          target.copy_(in.view(target.sizes()));
                        } else {
                          items.push_back(HcclSendRecvItem{
                              HCCL_RECV, address(target), static_cast<uint64_t>(target.numel()),
                              type, static_cast<uint32_t>(r)});
                        }
                      }
                      check_hccl(hccl().HcclBatchSendRecv(items.data(),
                                                          static_cast<uint32_t>(items.size()),
                                                          comm, stream),
                                 "HcclBatchSendRecv");
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  check_same_device(outputs, "scatter outputs");
  TORCH_CHECK_VALUE(outputs.size() == 1, "ProcessGroupHCCL: scatter takes one output tensor per "
                    "process");
  check_rank(static_cast<int>(opts.rootRank), getSize(), "scatter root");
  const int root = static_cast<int>(opts.rootRank);
  const at::Tensor output = outputs[0];
  std::vector<at::Tensor> sources;
  if (getRank() == root) {
    TORCH_CHECK_VALUE(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(getSize()),
                      "ProcessGroupHCCL: the scatter root needs one input tensor per rank (",
                      getSize(), ")");
    sources = inputs[0];
    check_same_device(sources, "scatter inputs");
    for (const auto& t : sources) {
      TORCH_CHECK_VALUE(t.numel() == output.numel() && t.scalar_type() == output.scalar_type(),
                        "ProcessGroupHCCL: every scatter input must match the output's size and "
                        "dtype");
    }
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                      "ProcessGroupHCCL: only the scatter root (rank ", root,
                      ") takes input tensors");
  }
  hccl_data_type(as_hccl_tensor(output, nullptr).scalar_type());
  const bool is_root = getRank() == root;
  std::vector<at::Tensor> reads = is_root ? sources : outputs;
  return collective(reads, outputs, c10d::OpType::SCATTER, "hccl:scatter",
                    [&](HcclComm comm, aclrtStream stream) {
                      at::Tensor out = as_hccl_tensor(output, nullptr);
                      const HcclDataType type = hccl_data_type(out.scalar_type());
                      if (!is_root) {
                        check_hccl(hccl().HcclRecv(address(out), out.numel(), type,
                                                   static_cast<uint32_t>(root), comm, stream),
                                   "HcclRecv");
                        return;
                      }
                      std::vector<HcclSendRecvItem> items;
                      for (int r = 0; r < getSize(); ++r) {
                        at::Tensor source = as_hccl_tensor(sources[r], nullptr);
                        if (r == root) {
                          out.copy_(source.view(out.sizes()));
                        } else {
                          items.push_back(HcclSendRecvItem{
                              HCCL_SEND, address(source), static_cast<uint64_t>(source.numel()),
                              type, static_cast<uint32_t>(r)});
                        }
                      }
                      check_hccl(hccl().HcclBatchSendRecv(items.data(),
                                                          static_cast<uint32_t>(items.size()),
                                                          comm, stream),
                                 "HcclBatchSendRecv");
                    });
}

// ---------------------------------------------------------------------------
// Uneven all-gather and reduce-scatter (torch_npu.distributed)

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather_into_tensor_uneven(
    at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& outputSplitSizes) {
  const char* op = "all_gather_into_tensor_uneven";
  check_same_device({input, output}, "all_gather_into_tensor_uneven tensors");
  TORCH_CHECK_VALUE(input.scalar_type() == output.scalar_type(), "ProcessGroupHCCL: ", op,
                    ": input and output dtypes differ (", input.scalar_type(), " vs ",
                    output.scalar_type(), ")");
  std::vector<uint64_t> recv_counts, recv_displs;
  split_pieces(output, outputSplitSizes, getSize(), op, "output", &recv_counts, &recv_displs);
  const uint64_t mine = recv_counts[getRank()];
  TORCH_CHECK_VALUE(static_cast<uint64_t>(as_hccl_tensor(input, nullptr).numel()) == mine,
                    "ProcessGroupHCCL: ", op, ": the input of rank ", getRank(),
                    " must fill its rows of the output (", mine, " elements), got ", input.numel(),
                    " elements");
  // Every rank sends its whole input to every rank.
  const std::vector<uint64_t> send_counts(getSize(), mine);
  const std::vector<uint64_t> send_displs(getSize(), 0);
  const HcclDataType type = hccl_data_type(as_hccl_tensor(input, nullptr).scalar_type());
  std::vector<at::Tensor> inputs{input};
  return collective(inputs, {output}, c10d::OpType::_ALLGATHER_BASE, "hccl:all_gather_uneven",
                    [&](HcclComm comm, aclrtStream stream) {
                      check_hccl(hccl().HcclAlltoAllV(address(input), send_counts.data(),
                                                      send_displs.data(), type, address(output),
                                                      recv_counts.data(), recv_displs.data(),
                                                      type, comm, stream),
                                 "HcclAlltoAllV");
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter_tensor_uneven(
    at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& inputSplitSizes,
    const c10d::ReduceOp& reduce_op) {
  const char* op = "reduce_scatter_tensor_uneven";
  check_same_device({input, output}, "reduce_scatter_tensor_uneven tensors");
  TORCH_CHECK_VALUE(input.scalar_type() == output.scalar_type(), "ProcessGroupHCCL: ", op,
                    ": input and output dtypes differ (", input.scalar_type(), " vs ",
                    output.scalar_type(), ")");
  const Reduction reduction(reduce_op);
  reduction.check(input.scalar_type());
  const HcclReduceOp hccl_op = hccl_reduce_op(reduction.hccl, input.scalar_type());
  std::vector<uint64_t> send_counts, send_displs;
  split_pieces(input, inputSplitSizes, getSize(), op, "input", &send_counts, &send_displs);
  const uint64_t mine = send_counts[getRank()];
  TORCH_CHECK_VALUE(static_cast<uint64_t>(as_hccl_tensor(output, nullptr).numel()) == mine,
                    "ProcessGroupHCCL: ", op, ": the output of rank ", getRank(),
                    " must hold its rows of the input (", mine, " elements), got ",
                    output.numel(), " elements");
  // Each rank's piece goes to its rank (HcclAlltoAllV, which also checks that
  // the ranks agree on the split sizes), which combines the pieces in rank
  // order, as HCCL's reductions do.
  std::vector<uint64_t> recv_counts(getSize(), mine);
  std::vector<uint64_t> recv_displs;
  for (int r = 0; r < getSize(); ++r) {
    recv_displs.push_back(r * mine);
  }
  const HcclDataType type = hccl_data_type(as_hccl_tensor(input, nullptr).scalar_type());
  std::vector<at::Tensor> inputs{input};
  return collective(
      inputs, {output}, c10d::OpType::_REDUCE_SCATTER_BASE, "hccl:reduce_scatter_uneven",
      [&](HcclComm comm, aclrtStream stream) {
        at::Tensor in = reduction.contribution(as_hccl_tensor(input, nullptr));
        at::Tensor out = as_hccl_tensor(output, nullptr).view({-1});
        at::Tensor pieces = at::empty({static_cast<int64_t>(mine) * getSize()}, in.options());
        check_hccl(hccl().HcclAlltoAllV(address(in), send_counts.data(), send_displs.data(), type,
                                        address(pieces), recv_counts.data(), recv_displs.data(),
                                        type, comm, stream),
                   "HcclAlltoAllV");
        const auto m = static_cast<int64_t>(mine);
        out.copy_(pieces.narrow(0, 0, m));
        for (int r = 1; r < getSize(); ++r) {
          combine_into(out, pieces.narrow(0, r * m, m), hccl_op);
        }
        if (reduction.average) {
          output.div_(getSize());
        }
      });
}

} // namespace c10d_npu
