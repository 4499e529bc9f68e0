// The generic executor for nested npu tensors: the kernel of the nested npu
// dispatch key (DeviceOpExecutor.h's run_nested_on_npu; Note [Nested npu
// tensors], NestedTensors.h).

#include <vector>

#include "DeviceChecks.h"
#include "DeviceOpExecutor.h"
#include "KernelArguments.h"
#include "OpTranslation.h"
#include "SynchronousExecution.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUStream.h"

namespace torch_npu_ops {

void run_nested_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::vector<c10::IValue> args = pop_arguments(op.schema(), stack);
  const c10::Device device = checked_op_device(op.schema(), args);
  const c10_npu::NPUGuard guard(device);
  const c10_npu::NPUStream stream = c10_npu::getCurrentNPUStream(device.index());
  // A nested result's buffer size depends on the data: the host waits.
  run_sync(translate(op, args), args, device, stream, stack);
}

} // namespace torch_npu_ops
