#include "SynchronousExecution.h"

#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "CallVerification.h"
#include "CpuAliases.h"
#include "DeclaredAccesses.h"
#include "ExecutionCounters.h"
#include "IValueTensors.h"
#include "KernelAllocator.h"
#include "KernelArguments.h"
#include "LaunchSite.h"
#include "NestedTensors.h"
#include "ResultCopy.h"
#include "SchemaAliases.h"
#include "SparseTensors.h"
#include "npu/NPUWork.h"

namespace torch_npu_ops {
namespace {

using c10::IValue;
using torch::jit::Stack;

// The results of a synchronous op, moved into npu memory by device work.
// The kernel left them in device-work memory (or in host memory, or
// aliasing its inputs); once the host knows their sizes it allocates npu
// tensors for them, and a work item queued after the op copies the values
// and frees the kernel's memory (device-work memory is freed by device
// work: no later work can still be using it).
class ResultTransfers {
 public:
  explicit ResultTransfers(c10::Device device) : device_(device) {}

  // A new npu tensor (of `result`'s layout) that will hold `result`'s values.
  at::Tensor to_npu(const at::Tensor& result) {
    if (!result.defined()) {
      return result;
    }
    if (is_sparse_layout(result)) {
      return sparse_with_members(result, device_, [&](const at::Tensor& m) { return to_npu(m); });
    }
    if (result.is_nested()) {
      // Its metadata are in host memory already (run_sync's worker).
      return nested_with_buffer(result, [&](const at::Tensor& buffer) { return to_npu(buffer); });
    }
    at::Tensor npu = empty_with_geometry_of(result);
    copy(npu, result);
    return npu;
  }

  // Queues the copy of `result` into the npu tensor `npu` (same sizes).
  void copy(const at::Tensor& npu, const at::Tensor& result) {
    if (npu.numel() > 0) {
      copies_.emplace_back(cpu_alias(npu), result);
      if (c10_npu::race_check_enabled()) {
        npu_results_.push_back(npu);
      }
    }
  }

  // An npu tensor with `result`'s sizes, strides and storage offset, as the
  // CPU returns it: npu results have the CPU's strides also where the CPU
  // kernel returns a view into a larger buffer (linalg.lstsq's solution is
  // the top rows of a column-major matrix, strides (1, rows of b)). A result
  // that surely overlaps itself (expanded: a stride 0) gets dense memory
  // instead, which the copy can write.
  at::Tensor empty_with_geometry_of(const at::Tensor& result) const {
    const auto options = result.options().device(device_);
    if (result.is_non_overlapping_and_dense() || result.numel() == 0 ||
        at::has_internal_overlap(result) == at::MemOverlap::Yes) {
      return at::empty_like(result, options); // dense strides kept, as Tensor.to keeps them
    }
    const size_t nbytes = at::detail::computeStorageNbytes(result.sizes(), result.strides(), result.element_size(),
                                                           result.storage_offset());
    const int64_t elements = static_cast<int64_t>(nbytes / result.element_size());
    at::Tensor npu = at::empty({elements}, options);
    npu.unsafeGetTensorImpl()->set_sizes_and_strides(result.sizes(), result.strides(), result.storage_offset());
    return npu;
  }

  void launch(const c10_npu::NPUStream& stream, const char* name) {
    if (copies_.empty()) {
      return;
    }
    // Note [Stream race detection]: the item writes the npu results (the
    // kernel's memory it reads is its own).
    c10_npu::WorkAccessScope accesses;
    if (C10_UNLIKELY(accesses.active())) {
      for (const at::Tensor& npu : npu_results_) {
        accesses.write(npu);
      }
    }
    // The kernel's memory is freed with the item, when the runtime releases
    // it (on the worker, after its last run: no later work can still be
    // using that memory).
    c10_npu::launch_host_work(stream, name, [copies = std::move(copies_)] {
      for (const auto& [npu, result] : copies) {
        copy_result(npu, result);
      }
    });
  }

 private:
  c10::Device device_;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies_; // (CPU view of npu memory, result)
  std::vector<at::Tensor> npu_results_; // the copies' destinations, while the race detector is on
};

// A CPU alias of out= argument `t` that its kernel may resize: a
// data-dependent kernel (masked_select, nonzero, unique, ...) learns its
// output's size only as it runs. Resizing moves the alias to new host memory
// (the old bytes copied, as resize_ keeps them), and run_sync then resizes
// the npu argument and copies the result back.
at::Tensor resizable_cpu_alias(const at::Tensor& t) {
  const c10::Storage& npu_storage = t.storage();
  c10::Storage storage(
      c10::Storage::use_byte_size_t(), npu_storage.nbytes(),
      c10::DataPtr(c10_npu::host_access(const_cast<void*>(npu_storage.data())), c10::Device(c10::DeviceType::CPU)),
      c10::GetCPUAllocator(), /*resizable=*/true);
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return at::Tensor(std::move(impl));
}

} // namespace

void run_sync(const TranslatedOp& target, const std::vector<IValue>& args, c10::Device device,
              const c10_npu::NPUStream& stream, Stack* stack) {
  reissue_deferred_warnings(); // Note [Warnings of queued work]
  const auto& schema = target.op.schema();
  struct State {
    std::vector<IValue> results;
    std::exception_ptr error;
    CallVerification verification; // the kernel's warnings, for the host
  };
  auto state = std::make_shared<State>();
  c10_npu::LaunchSite site = capture_launch_site();
  const std::vector<IValue> target_args = target.args_for(args);
  // Shared storages may be resized by the kernel (an out= that overlaps an
  // input: the CPU resizes it, then its overlap check refuses the call).
  std::vector<IValue> cpu_args = cpu_arguments(schema, target_args, device, /*resizable_shared=*/true);
  for (size_t i = 0; i < cpu_args.size() && i < schema.arguments().size(); ++i) {
    if (!schema.arguments()[i].is_out() || !cpu_args[i].isTensor()) {
      continue;
    }
    const at::Tensor& npu_out = target_args[i].toTensor();
    const at::Tensor& cpu_out = cpu_args[i].toTensor();
    // Not where the alias is an input too, or shares its storage with one
    // (SharedStorages.h): the kernel's overlap check must see that.
    if (is_npu(npu_out) && npu_out.layout() == c10::kStrided && !npu_out.is_nested() &&
        npu_out.storage().data() != nullptr &&
        !cpu_out.storage().resizable() && cpu_out.use_count() == 1 && cpu_out.storage().use_count() == 1) {
      cpu_args[i] = resizable_cpu_alias(npu_out);
    }
  }
  const c10::DispatchKeySet keys = kernel_keys(cpu_args, c10::BackendComponent::CPUBit);
  // Note [Stream race detection], for this launch only.
  std::optional<c10_npu::WorkAccessScope> accesses(std::in_place);
  if (C10_UNLIKELY(accesses->active())) {
    declare_argument_accesses(*accesses, schema, target_args);
  }
  c10_npu::launch_host_work(
      stream, schema.name().c_str(),
      [state, op = target.op, keys, cpu_args = std::move(cpu_args),
       grad_enabled = c10::GradMode::is_enabled()]() mutable {
        const CollectWarnings warnings(state->verification);
        try {
          const BelowAutograd autograd(grad_enabled);
          KernelAllocationScope allocations;
          Stack s = as_stack(cpu_args);
          op.redispatchBoxed(keys, &s);
          allocations.end();
          // The results stay where the kernel left them (device-work
          // memory, mostly) until the transfer work below copies them; the
          // host reads nested results' metadata, which get host memory now
          // (Note [Nested npu tensors]).
          for (IValue& result : s) {
            result = map_tensors(result, [](const at::Tensor& t) {
              return is_nested(t) ? nested_with_host_metadata(t) : t;
            });
          }
          state->results = std::move(s);
        } catch (...) {
          state->error = std::current_exception();
        }
      },
      nullptr, c10_npu::WorkFlags::Awaited);
  accesses.reset();
  stream.synchronize(); // an error of earlier work names its own launch
  for (const c10::Warning& warning : state->verification.warnings) {
    c10::warn(warning); // Python's warnings, as the CPU kernel's
  }
  if (state->error) {
    // The host waited: the error is raised at the call.
    try {
      std::rethrow_exception(state->error);
    } catch (c10::Error& e) {
      if (site != nullptr) {
        e.add_context("launched from " + *site);
      }
      throw;
    }
  }
  // Now that their sizes are known, the results get npu memory, and device
  // work copies them there: the host does not wait for that.
  ResultTransfers transfers(device);
  const auto& returns = target.caller_schema.returns();
  for (size_t i = 0; i < state->results.size(); ++i) {
    const IValue& result = state->results[i];
    const int alias = i < returns.size() ? aliased_argument(target.caller_schema, returns[i]) : -1;
    if (alias >= 0 && returns[i].alias_info()->isWrite()) {
      // An in-place or out= kernel may have given its output new memory
      // (an empty npu output's alias has none to write into; sparse outputs
      // get new members): the npu argument then takes the new values.
      const at::Tensor& out = result.isTensor() ? result.toTensor() : at::Tensor();
      const at::Tensor& npu_out = args[alias].isTensor() ? args[alias].toTensor() : at::Tensor();
      if (is_sparse_layout(npu_out)) {
        TORCH_CHECK(
            out.defined() && out.layout() == npu_out.layout(), schema.name(), ": the CPU kernel returned a ",
            out.defined() ? c10::str(out.layout()) : "undefined", " tensor for a ", npu_out.layout(), " output");
        set_sparse_members(npu_out, transfers.to_npu(out));
      } else if (is_nested(npu_out)) {
        // Nested kernels write in place into the buffer they were given.
        TORCH_CHECK(is_nested(out) && out.storage().data() == c10_npu::host_access(npu_out.storage().data()),
                    schema.name(), ": the CPU kernel did not write its nested output in place (a torch-npu-ops bug: "
                    "please report it)");
      } else if (out.defined() && npu_out.defined() &&
                 (out.data_ptr() != c10_npu::host_access(npu_out.data_ptr()) || !out.sizes().equals(npu_out.sizes()))) {
        if (out.is_contiguous()) {
          npu_out.resize_(out.sizes()); // reuses the npu memory when it is large enough, as the CPU's resize_
          transfers.copy(npu_out, out);
        } else {
          // The kernel restrided it (linalg.lstsq.out sets its solution to
          // a view of a larger column-major buffer): the npu argument takes
          // the same geometry, as the CPU's does.
          const at::Tensor npu = transfers.to_npu(out);
          npu_out.set_(npu.storage(), npu.storage_offset(), npu.sizes(), npu.strides());
        }
      }
      stack->push_back(args[alias]);
      continue;
    }
    // A view's result must share its base's memory; a copy would silently
    // break the aliasing (writes through it would be lost). Views are
    // shaped by their meta kernels, never run here.
    TORCH_CHECK(alias < 0, "torch-npu-ops: the view op ", schema.name(),
                " reached the synchronous path, which would return a copy instead of a view "
                "(a torch-npu-ops bug: please report it)");
    stack->push_back(map_tensors(result, [&](const at::Tensor& t) { return transfers.to_npu(t); }));
  }
  state->results.clear();
  transfers.launch(stream, schema.name().c_str());
  count(ExecutionPath::DeviceSync, schema.name());
}

} // namespace torch_npu_ops
