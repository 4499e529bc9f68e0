// What happens when an ATen op has no npu kernel.
//
// Core registers one boxed fallback for PrivateUse1 that calls the current
// handler. Core's handler raises an error naming torch-npu-ops; the ops
// package installs its own handler (its generic kernel path) at load time.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include "npu/Macros.h"

namespace c10_npu::aten {

using MissingKernelHandler = void (*)(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Replaces the handler; returns the previous one. Not thread-safe with
// concurrent dispatch: call it while loading a plugin.
TORCH_NPU_API MissingKernelHandler set_missing_kernel_handler(MissingKernelHandler handler);

} // namespace c10_npu::aten
