// The generic executor for nested npu tensors: the kernel of the nested npu
// dispatch key (DeviceOpExecutor.h's run_nested_on_npu; Note [Nested npu
// tensors], NestedTensors.h).

#include <string>
#include <vector>

#include "DeviceChecks.h"
#include "DeviceOpExecutor.h"
#include "KernelArguments.h"
#include "OpTranslation.h"
#include "SchemaAliases.h"
#include "SynchronousExecution.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUStream.h"

namespace torch_npu_ops {

namespace {

// Ops whose CPU nested kernel works on nested tensors of any device, run on
// the npu tensors themselves:
// - the metadata getters, which return host tensors on every device (CUDA's
//   too); as device work they came back as npu tensors, and the host code
//   that reads them (a nested view's backward) read device memory;
// - copy_, which copies buffer to buffer with the dense copy_: it copies
//   between a nested npu and a nested CPU tensor as CUDA's does (as device
//   work it refused the host tensor).
bool cpu_kernel_is_device_generic(const c10::FunctionSchema& schema) {
  const std::string& name = schema.name();
  return schema.overload_name().empty() &&
         (name == "aten::_nested_tensor_size" || name == "aten::_nested_tensor_strides" ||
          name == "aten::_nested_tensor_storage_offsets" || name == "aten::copy_");
}

} // namespace

void run_nested_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (returns_views(op.schema()) || cpu_kernel_is_device_generic(op.schema())) {
    // A view of a nested tensor is metadata over the same buffer; the CPU's
    // nested view kernels make it on any device (they read no values, and
    // views of the buffer itself are npu views). Run as device work, they
    // would return a copy: writes through it would be lost.
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::NestedTensorCPU), stack);
    return;
  }
  std::vector<c10::IValue> args = pop_arguments(op.schema(), stack);
  const c10::Device device = checked_op_device(op.schema(), args);
  const c10_npu::NPUGuard guard(device);
  const c10_npu::NPUStream stream = c10_npu::getCurrentNPUStream(device.index());
  // A nested result's buffer size depends on the data: the host waits.
  run_sync(translate(op, args), args, device, stream, stack);
}

} // namespace torch_npu_ops
