#include "DeviceOpExecutor.h"

#include <ATen/native/Resize.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/accumulate.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <memory>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "AsyncKernelWork.h"
#include "CallVerification.h"
#include "CaptureChecks.h"
#include "CpuAliases.h"
#include "DeclaredAccesses.h"
#include "DeviceChecks.h"
#include "ExecutionCounters.h"
#include "ExecutionPlan.h"
#include "IValueTensors.h"
#include "KernelArguments.h"
#include "LaunchSite.h"
#include "OpTranslation.h"
#include "OutVariants.h"
#include "OutputShapes.h"
#include "RangeFactoryOuts.h"
#include "SchemaAliases.h"
#include "SynchronousExecution.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUStream.h"
#include "npu/NPUWork.h"
#include "npu/SyncDebugMode.h"

namespace torch_npu_ops {
namespace {

using c10::IValue;
using torch::jit::Stack;

// After an out= argument was resized: the strides the meta kernel gave the
// output, when they describe the same memory (a permutation of a dense
// layout), as the CPU's structured kernels restride it.
void restride_like_meta(const at::Tensor& out, const TensorSpec& spec) {
  if (out.strides().equals(spec.strides)) {
    return;
  }
  const size_t needed = at::detail::computeStorageNbytes(spec.sizes, spec.strides, out.element_size(),
                                                         out.storage_offset());
  if (needed <= out.storage().nbytes() && out.numel() > 0) {
    out.as_strided_(spec.sizes, spec.strides);
  }
}

// Note [In-place ops keep their tensor's shape]: an in-place op writes a
// result of its tensor's shape, and the CPU refuses one that broadcasts to
// another shape ("output with shape [1] doesn't match the broadcast shape
// [2, 2]"). Some Python meta kernels (torch._refs' in-place wrappers, which
// PyTorch registers once torch._dynamo is imported) resize the meta tensor
// instead: resizing the npu tensor to their shape made fmod_, remainder_,
// copysign_, hypot_, xlogy_ ... of a [1] tensor by a [2, 2] one return a
// [2, 2] tensor of garbage. Only the ops whose purpose is a new shape may
// take the meta kernel's.
bool changes_its_own_shape(const c10::FunctionSchema& schema) {
  static const std::unordered_set<std::string_view> kNames = {
      "aten::resize_", "aten::resize_as_", "aten::set_", "aten::squeeze_", "aten::unsqueeze_",
      "aten::t_", "aten::transpose_", "aten::swapdims_", "aten::swapaxes_", "aten::as_strided_",
      "aten::_resize_output_", "aten::resize_as_sparse_", "aten::sparse_resize_",
      "aten::sparse_resize_and_clear_",
  };
  return kNames.count(schema.name()) > 0;
}

bool is_contiguous_spec(const TensorSpec& spec) {
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(spec.sizes.size()) - 1; d >= 0; --d) {
    if (spec.sizes[d] != 1 && spec.strides[d] != expected) {
      return false;
    }
    expected *= spec.sizes[d];
  }
  return true;
}

// Note [A resized out takes the functional result's layout]: the CPU's
// TensorIterator kernels (abs, exp2, log1p, ceil, sign, ... and the
// functional ops written as their out= kernel, abs, absolute, logical_not)
// give an out= they resize the layout of their inputs, channels_last for
// channels_last inputs, as their functional overloads do. PyTorch's Python
// meta kernels of those out= overloads (torch._refs' out wrapper) resize it
// contiguous, and so did npu. The functional overload's meta kernel keeps
// the layout: a contiguous out spec takes its strides when it is a dense
// layout of the same sizes.
// Not for the out= kernels that compute the functional result and copy it
// into the out after resize_output, which makes it contiguous whatever the
// result's layout (out_kernel_copies_the_functional_result).
// Note [Out kernels that copy the functional result]: the CPU's FFT out=
// kernels (_fft_c2c.out, _fft_r2c.out, _fft_c2r.out, reached by every
// torch.fft function given an out=) and cholesky.out resize an out to
// contiguous strides, where the functional FFTs lay a transformed dimension
// out last in memory and cholesky column-major. npu gave the resized out
// the functional layout: torch.fft.fft(x, dim=1, out=empty) or
// torch.cholesky(a, out=empty) returned a transposed out (out.view(-1)
// raised on npu), and only once the Python meta kernels were ready, so the
// same call returned either layout depending on its timing.
bool out_kernel_copies_the_functional_result(const c10::FunctionSchema& schema) {
  static const std::unordered_set<std::string_view> kNames = {
      "aten::_fft_c2c", "aten::_fft_r2c", "aten::_fft_c2r", "aten::cholesky",
  };
  return schema.overload_name() == "out" && kNames.count(schema.name()) > 0;
}

TensorSpec layout_of_a_resized_out(const c10::OperatorHandle& op, const std::vector<IValue>& args, size_t result,
                                   const TensorSpec& spec) {
  if (!spec.defined || !is_contiguous_spec(spec) || out_kernel_copies_the_functional_result(op.schema())) {
    return spec;
  }
  const std::optional<c10::OperatorHandle> functional = functional_variant(op);
  if (!functional.has_value()) {
    return spec;
  }
  const size_t num_args = functional->schema().arguments().size();
  if (args.size() < num_args) {
    return spec;
  }
  const std::vector<IValue> functional_args(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(num_args));
  const TranslatedOp target{*functional, functional->schema(), nullptr};
  std::shared_ptr<const OutputSpec> functional_spec;
  try {
    functional_spec = infer_outputs(target, functional_args);
  } catch (const std::exception&) {
    return spec;
  }
  if (functional_spec == nullptr || functional_spec->size() <= result || (*functional_spec)[result].size() != 1) {
    return spec;
  }
  TensorSpec taken = (*functional_spec)[result][0];
  if (!taken.defined || taken.sizes != spec.sizes || taken.storage_offset != 0) {
    return spec;
  }
  taken.dtype = spec.dtype;
  return taken;
}

// The npu tensors of an asynchronous call, made by the host before its work
// is queued.
struct AllocatedOutputs {
  std::vector<IValue> results;       // what the op returns, in order
  std::vector<at::Tensor> fresh;     // new npu outputs, in return order (undefined where the spec is)
  std::vector<bool> return_is_fresh; // per return: its tensors are among `fresh`
};

// Outputs on npu, shaped by the meta results.
AllocatedOutputs allocate_outputs(const c10::OperatorHandle& op, const OutputSpec& spec,
                                  const std::vector<IValue>& args, c10::Device device) {
  const c10::FunctionSchema& schema = op.schema();
  const auto& returns = schema.returns();
  AllocatedOutputs outputs;
  outputs.return_is_fresh.assign(returns.size(), false);
  for (size_t i = 0; i < returns.size() && i < spec.size(); ++i) {
    const std::vector<TensorSpec>& specs = spec[i];
    const bool is_list = returns[i].type()->kind() == c10::TypeKind::ListType;
    const int alias = aliased_argument(schema, returns[i]);
    if (alias >= 0 && returns[i].alias_info()->isWrite()) {
      // In-place or out=: the kernel writes into the argument, which the
      // meta kernel may have resized.
      const auto npu_outs = tensors_of(args[alias]);
      const bool is_out = schema.arguments()[alias].is_out();
      const bool keeps_same_numel = is_out && keeps_out_of_result_numel(schema);
      for (size_t k = 0; k < npu_outs.size() && k < specs.size(); ++k) {
        if (keeps_same_numel && specs[k].defined && npu_outs[k].numel() == c10::multiply_integers(specs[k].sizes)) {
          // Note [Range factories keep an out of the right size].
          continue;
        }
        if (specs[k].defined && !npu_outs[k].sizes().equals(specs[k].sizes)) {
          if (is_out) {
            // As the CPU's out= kernels: resize_output warns when it resizes
            // a non-empty tensor (on the host, at every call), then the
            // output takes the meta kernel's strides.
            at::native::resize_output(npu_outs[k], specs[k].sizes);
            restride_like_meta(npu_outs[k], layout_of_a_resized_out(op, args, i, specs[k]));
          } else {
            // Note [In-place ops keep their tensor's shape].
            TORCH_CHECK(changes_its_own_shape(schema), "output with shape ", npu_outs[k].sizes(),
                        " doesn't match the broadcast shape ", specs[k].sizes);
            npu_outs[k].resize_(specs[k].sizes);
          }
        }
      }
      outputs.results.push_back(args[alias]);
      continue;
    }
    std::vector<at::Tensor> outs;
    if (alias >= 0) {
      // A view of the argument.
      const auto base = tensors_of(args[alias]);
      for (size_t k = 0; k < specs.size(); ++k) {
        const at::Tensor& b = base[std::min(k, base.size() - 1)];
        outs.push_back(specs[k].defined ? view_of(b, specs[k]) : at::Tensor());
      }
    } else {
      outputs.return_is_fresh[i] = true;
      for (const auto& s : specs) {
        outs.push_back(s.defined ? at::empty_strided(s.sizes, s.strides,
                                                     at::TensorOptions().dtype(s.dtype).device(device))
                                 : at::Tensor());
        outputs.fresh.push_back(outs.back());
      }
    }
    if (is_list) {
      outputs.results.emplace_back(c10::List<at::Tensor>(outs));
    } else {
      outputs.results.emplace_back(outs.empty() ? at::Tensor() : outs[0]);
    }
  }
  return outputs;
}

// Queues the op's CPU kernel on `stream`, writing into `outputs`, and, for a
// call signature that has not run cleanly yet, waits for it.
void launch_kernel(const ExecutionPlan& plan, const std::vector<IValue>& args, const AllocatedOutputs& outputs,
                   c10::Device device, const c10_npu::NPUStream& stream) {
  const TranslatedOp& target = plan.target;
  const auto& target_schema = target.op.schema();
  std::vector<IValue> cpu_args = cpu_arguments(target_schema, target.args_for(args), device);
  c10_npu::LaunchSite site = capture_launch_site();
  // Note [Stream race detection]: the arguments, and the fresh outputs
  // (written).
  c10_npu::WorkAccessScope accesses;
  if (C10_UNLIKELY(accesses.active())) {
    declare_argument_accesses(accesses, target_schema, target.args_for(args));
    for (const at::Tensor& out : outputs.fresh) {
      accesses.write(out);
    }
  }

  // Note [Errors at the call]: the first call of a signature waits for its
  // kernel and raises the kernel's own exception here.
  const uint64_t signature = call_signature(target_schema, target.args_for(args));
  std::shared_ptr<CallVerification> verification = verification_for(signature);
  // Note [Verified calls run the functional kernel]
  if (plan.out_op.has_value() && verification == nullptr) {
    for (const auto& out : outputs.fresh) {
      cpu_args.emplace_back(cpu_alias(out));
    }
    OutVariantWork work{
        .functional = target.op,
        .op = *plan.out_op,
        .cpu_args = std::move(cpu_args),
        .num_outputs = outputs.fresh.size(),
        .output_geometry = geometries(cpu_aliases(outputs.fresh)),
        .grad_enabled = c10::GradMode::is_enabled(),
    };
    c10_npu::launch_host_work(
        stream, target_schema.name().c_str(), verified_work(verification, signature, std::move(work)), std::move(site));
  } else {
    // Computed before cpu_args moves into the work item.
    auto out_args = out_argument_geometry(target_schema, cpu_args);
    std::vector<std::pair<bool, bool>> out_bits;
    for (const auto& [index, geometry] : out_args) {
      out_bits.emplace_back(cpu_args[index].toTensor().is_conj(), cpu_args[index].toTensor().is_neg());
    }
    OpKernelWork work{
        .op = target.op,
        .cpu_args = std::move(cpu_args),
        .fresh_views = cpu_aliases(outputs.fresh),
        .return_is_fresh = outputs.return_is_fresh,
        .out_args = std::move(out_args),
        .out_bits = std::move(out_bits),
        .grad_enabled = c10::GradMode::is_enabled(),
    };
    c10_npu::launch_host_work(
        stream, target_schema.name().c_str(), verified_work(verification, signature, std::move(work)), std::move(site));
  }
  if (verification != nullptr) {
    // Note [Stream race detection]: a device would not wait here.
    finish_verification(verification, signature, [&] { c10_npu::synchronize_unordered(stream); });
  }
}

} // namespace

void run_on_npu(const c10::OperatorHandle& op, Stack* stack) {
  std::vector<IValue> args = pop_arguments(op.schema(), stack);
  const c10::Device device = checked_op_device(op.schema(), args);
  const c10_npu::NPUGuard guard(device);
  const c10_npu::NPUStream stream = c10_npu::getCurrentNPUStream(device.index());
  if (C10_UNLIKELY(c10_npu::captures_underway())) {
    std::vector<at::Tensor> tensors;
    for (const IValue& arg : args) {
      for_each_tensor(arg, [&](const at::Tensor& t) { tensors.push_back(t); });
    }
    check_use_beside_capture(op.schema().name().c_str(), stream, tensors);
  }
  const ExecutionPlan plan = plan_execution(op, args);
  if (plan.synchronous()) {
    if (plan.waits_for_values) {
      c10_npu::warn_or_error_on_sync(); // Note [Synchronizing operations]
    }
    run_sync(plan.target, args, device, stream, stack);
    return;
  }
  AllocatedOutputs outputs = allocate_outputs(op, *plan.outputs, args, device);
  launch_kernel(plan, args, outputs, device, stream);
  for (auto& r : outputs.results) {
    stack->push_back(std::move(r));
  }
  count(ExecutionPath::DeviceAsync, op.schema().name());
}

} // namespace torch_npu_ops
