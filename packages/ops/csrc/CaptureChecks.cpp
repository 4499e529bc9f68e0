#include "CaptureChecks.h"

#include <c10/util/Exception.h>

#include "npu/NPUCachingAllocator.h"

namespace torch_npu_ops {

void check_use_beside_capture(const char* op, const c10_npu::NPUStream& stream,
                              const std::vector<at::Tensor>& tensors) {
  if (c10_npu::stream_capture_status(stream) != c10_npu::CaptureStatus::None) {
    return; // captured work: it runs at each replay, after what it depends on
  }
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !t.device().is_privateuseone() || !t.has_storage()) {
      continue;
    }
    const void* base = t.storage().data_ptr().get();
    if (base == nullptr || !c10_npu::NPUCachingAllocator::allocatedByCaptureUnderway(t.device().index(), base)) {
      continue;
    }
    TORCH_CHECK(
        false, op, " on npu stream ", stream.id(),
        " uses a tensor that a graph capture underway allocated; its contents exist only once the "
        "graph replays, so this work would read or write garbage. To make it part of the "
        "capture, let the stream join it first (stream.wait_stream(capturing_stream)) and join "
        "back before the capture ends (capturing_stream.wait_stream(stream)); otherwise use the "
        "tensor after the capture ended and the graph replayed.");
  }
}

} // namespace torch_npu_ops
