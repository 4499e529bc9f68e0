#include "KernelInstallation.h"

#include <mutex>

#include "CpuKernelOverrides.h"
#include "DeviceOpExecutor.h"
#include "KernelAllocator.h"
#include "NestedTensors.h"
#include "SparseTensors.h"
#include "aten/MissingKernelFallback.h"
#include "npu/NPUFunctions.h"

namespace torch_npu_ops {

void install_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Every op without a dedicated npu kernel runs through the generic
    // device executor from now on.
    c10_npu::aten::set_missing_kernel_handler(&run_on_npu);
    // Ops whose composite kernels would otherwise run on npu instead of
    // their CPU kernel.
    install_cpu_kernel_overrides();
    install_sparse_kernels();
    install_nested_kernels();
    // Before any device work: CPU kernels running as device work then
    // allocate device memory (and may compute results in their outputs).
    install_kernel_allocator();
  });
}

namespace {

// For C++ programs, which have no plugin loader: installed when the runtime
// initialises, once every static registration of the library is done (the
// sparse kernels enumerate the operators). Not at once if the runtime is
// initialised already, which would run it among this library's static
// initialisers: a library loaded that late is Python's, which installs.
const bool g_installs_at_runtime_init = [] {
  if (!c10_npu::is_initialized()) {
    c10_npu::call_after_init(&install_kernels);
  }
  return true;
}();

} // namespace

} // namespace torch_npu_ops
