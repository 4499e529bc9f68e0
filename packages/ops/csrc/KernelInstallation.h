// Turning the npu kernels of libtorch_npu_ops on, in Python and C++ alike.
//
// Loading the library registers its dedicated kernels (TORCH_LIBRARY_IMPL);
// install_kernels does what registration at load cannot: it makes the
// generic executor core's missing-kernel handler, registers the CPU-kernel
// overrides and sparse kernels (which enumerate the operators registered by
// then) and wraps the CPU allocator for kernels running as device work.
//
// torch_npu.ops._C calls it when the plugin loads in Python. A C++ program
// that links libtorch_npu_ops (find_package(TorchNPUOps)) gets it when the
// runtime initialises (torch_npu::init_npu, or the first device use): the
// library asks core for that at load (c10_npu::call_after_init). Note [The
// C++ runtime without Python] in core's libs/init_npu.h.
#pragma once

#include <c10/core/DispatchKey.h>
#include <torch/library.h>

#include <functional>

namespace torch_npu_ops {

// Calls `register_op(library, name)` for every operator that has a kernel for
// `cpu_key` and none for `npu_key`, with a registration library of the
// operator's namespace for `npu_key` (kept for the process). Registering per
// op, not as a fallback: for an op without a kernel for a dispatch key, the
// dispatcher prefers a composite kernel (written for dense tensors) to the
// key's fallback. Once per key pair, after the ops are loaded.
void register_where_the_cpu_has_a_kernel(
    c10::DispatchKey cpu_key, c10::DispatchKey npu_key,
    const std::function<void(torch::Library& library, const char* op_name)>& register_op);

// Idempotent; before any op runs on npu.
void install_kernels();

} // namespace torch_npu_ops
