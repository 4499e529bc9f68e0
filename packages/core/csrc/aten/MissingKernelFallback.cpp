#include "aten/MissingKernelFallback.h"

#include <atomic>

#include <torch/library.h>

namespace c10_npu::aten {
namespace {

void raise_missing_kernel(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "The operator '", op.schema().operator_name(),
      "' has no npu kernel in torch-npu-core, which provides only tensor "
      "creation, copies and views. The other kernels come with the operator "
      "package, `pip install torch-npu-ops` (or `pip install 'torch-npu[ops]'`): "
      "`import torch_npu` loads them, and a C++ program gets them by linking "
      "torch_npu::torch_npu_ops (find_package(TorchNPUOps)).");
}

std::atomic<MissingKernelHandler> g_handler{&raise_missing_kernel};

void dispatch_missing_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  g_handler.load(std::memory_order_acquire)(op, stack);
}

} // namespace

MissingKernelHandler set_missing_kernel_handler(MissingKernelHandler handler) {
  return g_handler.exchange(handler != nullptr ? handler : &raise_missing_kernel);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&dispatch_missing_kernel>());
}

} // namespace c10_npu::aten
