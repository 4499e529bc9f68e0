// The generic executor for sparse npu tensors: the boxed fallback of the
// sparse npu dispatch keys (DeviceOpExecutor.h's run_sparse_on_npu).
//
// A sparse op's CPU kernel runs as device work on CPU aliases of its sparse
// arguments' members. Most sparse results have sizes that depend on the data
// (nnz), so the host waits for them (the synchronous path); an op whose
// results are dense and predictable (SparseResultShapes.h) is queued like a
// dense op instead.

#include <ATen/ops/empty_strided.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <utility>
#include <vector>

#include "CpuAliases.h"
#include "DeclaredAccesses.h"
#include "DeviceChecks.h"
#include "DeviceOpExecutor.h"
#include "ExecutionCounters.h"
#include "IValueTensors.h"
#include "KernelAllocator.h"
#include "KernelArguments.h"
#include "LaunchSite.h"
#include "OpTranslation.h"
#include "OutputShapes.h"
#include "ResultCopy.h"
#include "SchemaAliases.h"
#include "SparseResultShapes.h"
#include "SparseTensors.h"
#include "SynchronousExecution.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUStream.h"
#include "npu/NPUWork.h"

namespace torch_npu_ops {
namespace {

using c10::IValue;
using torch::jit::Stack;

// Queues a sparse op with dense results (SparseOpResults::predict) like
// any other op: the host returns once the work is queued. Fresh results are
// allocated here and the kernel's results copied into them; an argument the
// op writes into takes the predicted sizes now, and the kernel writes into it.
void run_sparse_async(const TranslatedOp& target, const std::vector<IValue>& args,
                      const std::vector<TensorSpec>& specs, c10::Device device,
                      const c10_npu::NPUStream& stream, Stack* stack) {
  const auto& returns = target.caller_schema.returns();
  std::vector<IValue> results;
  std::vector<at::Tensor> outputs;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& spec = specs[i];
    const int alias = aliased_argument(target.caller_schema, returns[i]);
    if (alias >= 0) {
      at::Tensor out = args[alias].toTensor();
      if (!out.sizes().equals(spec.sizes)) {
        out.resize_(spec.sizes);
      }
      outputs.push_back(out);
      results.push_back(args[alias]);
    } else {
      outputs.push_back(at::empty_strided(spec.sizes, spec.strides, at::TensorOptions().dtype(spec.dtype).device(device)));
      results.emplace_back(outputs.back());
    }
  }
  const auto& schema = target.op.schema();
  const std::vector<IValue> target_args = target.args_for(args);
  std::vector<IValue> cpu_args = cpu_arguments(schema, target_args, device);
  const c10::DispatchKeySet keys = kernel_keys(cpu_args, c10::BackendComponent::CPUBit);
  // Note [Stream race detection]: the kernel reads its arguments and writes
  // its mutable ones and the results.
  c10_npu::WorkAccessScope accesses;
  if (C10_UNLIKELY(accesses.active())) {
    declare_argument_accesses(accesses, schema, target_args);
    for (const at::Tensor& out : outputs) {
      accesses.write(out);
    }
  }
  c10_npu::launch_host_work(
      stream, schema.name().c_str(),
      [op = target.op, keys, cpu_args = std::move(cpu_args), views = cpu_aliases(outputs),
       grad_enabled = c10::GradMode::is_enabled()]() mutable {
        const BelowAutograd autograd(grad_enabled);
        KernelAllocationScope allocations;
        Stack s = as_stack(cpu_args);
        op.redispatchBoxed(keys, &s);
        for (size_t i = 0; i < views.size() && i < s.size(); ++i) {
          const at::Tensor& result = s[i].toTensor();
          // The results were sized before the kernel ran; copy_ would
          // broadcast a result of other sizes.
          TORCH_CHECK(result.layout() == c10::kStrided && result.sizes().equals(views[i].sizes()), op.schema().name(),
                      ": the CPU kernel returned a ", result.layout(), " result of sizes ", result.sizes(),
                      " where a strided one of sizes ", views[i].sizes(), " was expected (a torch-npu-ops bug)");
          if (views[i].numel() > 0 && result.const_data_ptr() != views[i].const_data_ptr()) {
            copy_result(views[i], result);
            count_result(ResultDelivery::Copied);
          }
        }
      },
      capture_launch_site());
  for (auto& result : results) {
    stack->push_back(std::move(result));
  }
  count(ExecutionPath::DeviceAsync, schema.name());
}

// The CPU dispatch key of the sparse layout among `schema`'s arguments on top
// of `stack`: SparseCPU for a COO tensor, SparseCsrCPU for a compressed one.
c10::DispatchKey sparse_cpu_key(const c10::FunctionSchema& schema, const Stack& stack) {
  bool coo = false;
  for (const IValue& arg : torch::jit::last(stack, schema.arguments().size())) {
    for_each_tensor(arg, [&](const at::Tensor& t) { coo = coo || (t.defined() && t.layout() == c10::kSparse); });
  }
  return coo ? c10::DispatchKey::SparseCPU : c10::DispatchKey::SparseCsrCPU;
}

} // namespace

void run_sparse_on_npu(const c10::OperatorHandle& op, Stack* stack) {
  if (returns_views(op.schema())) {
    // A view of a sparse tensor (permute, unsqueeze, view_as_real, select of
    // a compressed tensor, _sparse_broadcast_to) is a sparse tensor whose
    // members are views of the input's or made from them by dense ops: the
    // CPU's kernels, which are CUDA's too, make it on any device. Run as
    // device work, they would return a copy (refused by run_sync).
    const c10::DispatchKey cpu_key = sparse_cpu_key(op.schema(), *stack);
    if (op.hasKernelForDispatchKey(cpu_key)) {
      op.redispatchBoxed(c10::DispatchKeySet(cpu_key), stack);
      return;
    }
  }
  std::vector<IValue> args = pop_arguments(op.schema(), stack);
  const c10::Device device = checked_op_device(op.schema(), args);
  const c10_npu::NPUGuard guard(device);
  const c10_npu::NPUStream stream = c10_npu::getCurrentNPUStream(device.index());
  const TranslatedOp target = translate(op, args);
  const SparseOpResults results(target, args);
  if (const auto outputs = results.predict()) {
    run_sparse_async(target, args, *outputs, device, stream, stack);
    return;
  }
  const size_t below = stack->size();
  run_sync(target, args, device, stream, stack);
  results.learn(c10::ArrayRef<IValue>(*stack).slice(below));
}

} // namespace torch_npu_ops
