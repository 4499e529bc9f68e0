// The check ops make while a graph capture is underway (Note [Work beside a
// capture], core's NPUGraphsUtils.h): work on a stream that does not take
// part in the capture must not use memory the capture allocated.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "npu/NPUGraphsUtils.h"
#include "npu/NPUStream.h"

namespace torch_npu_ops {

// Raises if `stream` takes no part in a capture and one of `tensors` is
// memory a capture underway allocated. Call only when
// c10_npu::captures_underway().
void check_use_beside_capture(const char* op, const c10_npu::NPUStream& stream,
                              const std::vector<at::Tensor>& tensors);

} // namespace torch_npu_ops
