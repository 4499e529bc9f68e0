// The generic executor's synchronous path: the op runs as device work and
// the host waits for it.
//
// The host must wait when it cannot know an op's results before the kernel
// ran: their sizes depend on the data (nonzero, unique, masked_select, ...),
// the op has no meta kernel (or one that disagrees with the CPU kernel), the
// CPU kernel must see an out= argument as given (ExecutionPlan.cpp's
// resizes_an_overlapping_out), or a sparse op's results cannot be predicted
// (SparseExecution.cpp). The kernel still runs as device work in
// stream order, on CPU aliases of device memory; the host waits for it,
// raises its error at the call, then gives its results npu memory, and
// further device work copies them there.
#pragma once

#include <vector>

#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

#include "OpTranslation.h"
#include "npu/NPUStream.h"

namespace torch_npu_ops {

// Runs the op synchronously as device work and returns its results on npu.
void run_sync(const TranslatedOp& target, const std::vector<c10::IValue>& args, c10::Device device,
              const c10_npu::NPUStream& stream, torch::jit::Stack* stack);

} // namespace torch_npu_ops
