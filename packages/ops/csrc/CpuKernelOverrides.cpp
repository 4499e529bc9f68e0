// Ops whose CPU kernel the fallback would never reach on npu.
//
// An op with a CompositeExplicitAutograd(NonFunctional) or
// CompositeImplicitAutograd kernel runs that kernel on every backend without
// a kernel of its own: the backend fallback (the generic executor) is not
// consulted. Where the op also has a dedicated CPU kernel, the CPU runs that
// instead, so npu ran something else than the CPU:
// - CompositeExplicitAutograd decompositions round differently (addr,
//   group_norm in reduced precision) or take another route (layer_norm went
//   through batch_norm);
// - CompositeExplicitAutogradNonFunctional is how a structured op's
//   functional and in-place forms reach a backend that has only the out=
//   kernel: meta kernel on npu, then the out= form. That runs the meta twice
//   and, where the out= kernel treats its output differently from the
//   functional kernel, behaves differently: mse_loss.out resizes its scalar
//   output to the input's shape first, which warned at every mse_loss;
// - silu_backward, mish_backward and native_channel_shuffle: a
//   CompositeImplicitAutograd kernel served the npu keys because npu had no
//   kernel of its own; mode.values, whose explicit composite kernel accepts
//   CPU, CUDA and XPU tensors only (torch.mode(x, out=...) failed on npu);
//   conj_physical_, whose explicit composite kernel (there is no CPU one)
//   calls conj_physical's DispatchStub for the tensor's device, which has
//   no npu entry: every conj_physical_ of a complex npu tensor, and so
//   torch.svd(..., out=) of a complex one, failed with the stub's internal
//   assert ("DispatchStub: missing kernel for npu").
// - the multi-tensor ops (_foreach_*), whose composite kernel loops over
//   the tensors on the host, one launch each.
// Registering the executor for them runs their CPU kernel, as for every other
// op. The first groups are derived from the dispatcher when the package
// is installed (every aten op with a CPU kernel, an explicit composite one
// and no npu kernel of ours: 400 ops on torch 2.13), so that a new torch
// needs no list update; the third is listed (their composite kernel also
// serves autograd, so only these, checked one by one, may be replaced).
#include "CpuKernelOverrides.h"

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "DeviceOpExecutor.h"

namespace torch_npu_ops {
namespace {

bool runs_a_composite_kernel_on_npu(const c10::OperatorHandle& op) {
  if (op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
    return false;
  }
  const bool explicit_composite =
      op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
      op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
  if (op.hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
    return explicit_composite;
  }
  // The multi-tensor ops (_foreach_*) have no CPU kernel: on the CPU their
  // composite kernel loops over the tensors. On npu that loop ran on the
  // host, one launch per tensor (20 launches for 20 parameters); as one
  // device-work item it is one launch, what "foreach" means on a device.
  return explicit_composite && op.schema().name().rfind("aten::_foreach_", 0) == 0;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"mish_backward", "native_channel_shuffle", "silu_backward", "mode.values", "conj_physical_"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&run_on_npu>());
  }
}

size_t install_cpu_kernel_overrides() {
  // Kept for the life of the process: the registrations end with it.
  static std::unique_ptr<torch::Library> library;
  static size_t installed = 0;
  if (library != nullptr) {
    return installed;
  }
  // Collected first: registering changes what the dispatcher reports.
  std::vector<c10::OperatorName> names;
  for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) {
      continue;
    }
    const auto op = c10::Dispatcher::singleton().findOp(name);
    if (op.has_value() && runs_a_composite_kernel_on_npu(*op)) {
      names.push_back(name);
    }
  }
  library = std::make_unique<torch::Library>(
      torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  for (const auto& name : names) {
    std::string full = name.name.substr(6); // without "aten::"
    if (!name.overload_name.empty()) {
      full += "." + name.overload_name;
    }
    library->impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_on_npu>());
  }
  installed = names.size();
  return installed;
}

} // namespace torch_npu_ops
