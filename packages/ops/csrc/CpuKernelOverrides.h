// Routing to the CPU kernel the ops whose composite kernels would otherwise
// run on npu (see CpuKernelOverrides.cpp).
#pragma once

#include <cstddef>

namespace torch_npu_ops {

// Registers the generic executor as the npu kernel of every aten op that
// has a CPU kernel and an explicit composite kernel but no npu kernel yet.
// Call once the package's static registrations are done (idempotent);
// returns how many ops it registered.
size_t install_cpu_kernel_overrides();

} // namespace torch_npu_ops
