// convolution_overrideable and its backward have default kernels that throw
// for every backend but CPU/CUDA; PrivateUse1 must register its own. They
// run through the generic executor, which translates them to
// aten::convolution / aten::convolution_backward (see OpTranslation).
#include <torch/library.h>

#include "DeviceOpExecutor.h"

namespace torch_npu_ops {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", torch::CppFunction::makeFromBoxedFunction<&run_on_npu>());
  m.impl("convolution_backward_overrideable", torch::CppFunction::makeFromBoxedFunction<&run_on_npu>());
}

} // namespace torch_npu_ops
