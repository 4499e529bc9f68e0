// torch_npu.ops._C: installs the npu kernels of libtorch_npu_ops, with the
// Python parts (launch sites, meta-kernel warm-up), and exposes the counters.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "ExecutionCounters.h"
#include "KernelInstallation.h"
#include "LaunchSite.h"
#include "OutputShapes.h"
#include "PythonMetaWarmup.h"
#include "npu/NPUFunctions.h"
#include "npu/WorkAccesses.h"
#include "python/PythonLaunchSite.h"
#include "python/PythonMetaWarmupStart.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_npu.ops._C: the npu kernels of torch-npu-ops";
  m.def("_install", [] {
    // Before the kernels can run: their errors name the Python line, and
    // the executor waits for Python's meta kernels (the Note in
    // PythonMetaWarmup.h).
    torch_npu_ops::set_launch_site_capture(&torch_npu_ops::capture_python_launch_site);
    torch_npu_ops::set_meta_warmup_starter(&torch_npu_ops::start_python_meta_warmup);
    torch_npu_ops::install_kernels();
    // The stream race detector names the Python line of each access.
    c10_npu::set_launch_site_provider(&torch_npu_ops::capture_python_launch_site);
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
