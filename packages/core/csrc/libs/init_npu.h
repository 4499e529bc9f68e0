// The libtorch entry points of torch_npu: what a C++ program calls instead of
// `import torch_npu` (the names and overloads of Ascend's torch_npu, whose
// header is torch_npu/csrc/libs/init_npu.h; here it is "libs/init_npu.h"
// under the include directory of core's CMake package).
//
//   #include "libs/init_npu.h"
//   torch_npu::init_npu("npu:0");
//   auto x = at::ones({4}, at::TensorOptions().device("npu:0"));
//   ...
//   torch_npu::finalize_npu();
//
// Note [The C++ runtime without Python]
// Linking libtorch_npu_core already registers, through static initialisers,
// the device guard, the hooks, the allocators and core's kernels (tensor
// creation, copies, fill, item, views). What `import torch_npu` adds that a
// C++ program needs is the device type's name: PrivateUse1 is called "npu"
// only once registered, and device strings such as "npu:0" do not parse
// before. init_npu registers it (unless Python already did), initialises
// the runtime and sets the device.
// The other ATen kernels are torch-npu-ops' libtorch_npu_ops, which has no
// Python in it (torch_npu.ops._C adds the Python parts): a program that
// links torch_npu::torch_npu_ops (find_package(TorchNPUOps)) gets them, the
// library installing its executor when the runtime initialises
// (c10_npu::call_after_init; packages/ops/csrc/KernelInstallation.h). Without
// it, a program has core's kernels, and any other op raises the
// missing-kernel error of aten/MissingKernelFallback.h, which says so. What
// torch-npu-ops does in Python only (torch.npu.amp's Python API, the
// torch.ops.npu custom ops, the warm-up of torch's Python meta kernels) a
// C++ program does not need or cannot have.
#pragma once

#include <string>

#include <c10/core/Device.h>

#include "npu/Macros.h"

namespace torch_npu {

// Makes "npu" the name of the PrivateUse1 device type, initialises the
// runtime and makes `device_index` the calling thread's current device.
// Raises for an index outside [0, device count). May be called again, to
// switch devices; not after finalize_npu.
TORCH_NPU_API void init_npu(c10::DeviceIndex device_index = 0);

// As above for a device string: "npu" (device 0) or "npu:<index>".
// Anything else raises an error that says what is expected.
TORCH_NPU_API void init_npu(const std::string& device_str);

// As above for a device, which must be of type npu (PrivateUse1).
TORCH_NPU_API void init_npu(const c10::Device& device);

// Ends the process's use of the NPU: waits for the work queued on every
// device the process used, returns the caching allocators' free memory
// (device and pinned host memory) to the runtime, resets those devices and
// finalizes the runtime (aclrtResetDevice, aclFinalize). Tensors and process
// groups (their HCCL communicators) must be gone before: destroy them
// first. Any later use of an npu device raises. Does nothing when the
// runtime was never initialised or has been finalized already.
TORCH_NPU_API void finalize_npu();

} // namespace torch_npu
