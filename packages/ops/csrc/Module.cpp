// torch_npu.ops._C: installs the npu kernels and exposes the counters.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "CpuKernelOverrides.h"
#include "DeviceOpExecutor.h"
#include "ExecutionCounters.h"
#include "KernelAllocator.h"
#include "LaunchSite.h"
#include "OutputShapes.h"
#include "PythonMetaWarmup.h"
#include "SparseTensors.h"
#include "aten/MissingKernelFallback.h"
#include "npu/NPUFunctions.h"
#include "npu/WorkAccesses.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_npu.ops._C: the npu kernels of torch-npu-ops";
  m.def("_install", [] {
    // Every op without a dedicated npu kernel runs through the generic
    // device executor from now on.
    c10_npu::aten::set_missing_kernel_handler(&torch_npu_ops::run_on_npu);
    // Ops whose composite kernels would otherwise run on npu instead of
    // their CPU kernel.
    torch_npu_ops::install_cpu_kernel_overrides();
    torch_npu_ops::install_sparse_kernels();
    // Before any device work: CPU kernels running as device work then
    // allocate device memory (and may compute results in their outputs).
    torch_npu_ops::install_kernel_allocator();
    // The stream race detector names the Python line of each access.
    c10_npu::set_launch_site_provider(&torch_npu_ops::capture_launch_site);
    // A process's first device use (a model moved to npu) starts the meta
    // kernels' imports, which then overlap the script's own setup.
    c10_npu::call_after_init([] { torch_npu_ops::meta_kernels_ready(); });
  });
  m.def("_execution_counters", &torch_npu_ops::counters);
  m.def("_set_meta_kernels_ready", &torch_npu_ops::set_meta_kernels_ready);
  m.def("_shaping_npu_outputs", &torch_npu_ops::shaping_npu_outputs);
  m.def("_sync_ops", &torch_npu_ops::sync_ops);
  m.def("_reset_execution_counters", &torch_npu_ops::reset_counters);
}
