#include "KernelInstallation.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "CpuKernelOverrides.h"
#include "DeviceOpExecutor.h"
#include "KernelAllocator.h"
#include "NestedTensors.h"
#include "SparseTensors.h"
#include "aten/MissingKernelFallback.h"
#include "npu/NPUFunctions.h"

namespace torch_npu_ops {

void register_where_the_cpu_has_a_kernel(
    c10::DispatchKey cpu_key, c10::DispatchKey npu_key,
    const std::function<void(torch::Library& library, const char* op_name)>& register_op) {
  static std::map<std::pair<std::string, c10::DispatchKey>, std::unique_ptr<torch::Library>> libraries;
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    const auto op = dispatcher.findOp(name);
    const auto ns = name.getNamespace();
    if (!op.has_value() || !ns.has_value() || !op->hasKernelForDispatchKey(cpu_key) ||
        op->hasKernelForDispatchKey(npu_key)) {
      continue;
    }
    auto& library = libraries[{std::string(*ns), npu_key}];
    if (library == nullptr) {
      library = std::make_unique<torch::Library>(torch::Library::IMPL, std::string(*ns), npu_key, __FILE__, __LINE__);
    }
    std::string op_name = name.name.substr(ns->size() + 2);
    if (!name.overload_name.empty()) {
      op_name += "." + name.overload_name;
    }
    register_op(*library, op_name.c_str());
  }
}

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
