// Ops whose CPU kernel the fallback would never reach on npu.
//
// An op with a CompositeExplicitAutograd or CompositeImplicitAutograd kernel
// runs that decomposition on every backend without a kernel of its own: the
// backend fallback (the generic executor) is not consulted. These ops also
// have a dedicated CPU kernel, which the CPU runs instead of the
// decomposition, so npu computed something else than the CPU: addr,
// group_norm and mish's backward round differently in reduced precision, and
// layer_norm went through batch_norm. silu_backward is the same one level up:
// its CompositeImplicitAutograd kernel served AutogradPrivateUse1 because npu
// had no kernel of its own. Registering the executor for them runs their CPU
// kernel, as for every other op (on x86-64, native_layer_norm has a
// dedicated kernel in NormKernels.cpp). (The list is every aten op with a CPU
// kernel whose PrivateUse1 or AutogradPrivateUse1 entry was a composite one
// where the CPU's is not, torch 2.13.)
#include <torch/library.h>

#include "DeviceOpExecutor.h"

namespace torch_npu_ops {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {
           "addr", "addr.out", "native_group_norm", "mish_backward",
#ifndef __x86_64__
           "native_layer_norm", // on x86-64, NormKernels.cpp registers it
#endif
           "native_channel_shuffle", "_stack", "_stack.out", "all.dims_out", "any.dims_out",
           "linalg__powsum", "silu_backward",
       }) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&run_on_npu>());
  }
}

} // namespace torch_npu_ops
