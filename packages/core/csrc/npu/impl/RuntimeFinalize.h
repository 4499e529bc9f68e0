// The end of the runtime's life in a process, for torch_npu::finalize_npu
// (libs/init_npu.h): core's own, so that only that entry point, which frees
// the cached memory first, finalizes.
#pragma once

namespace c10_npu {

// Resets every device this process initialised and finalizes the runtime
// (aclrtResetDevice, aclFinalize) after waiting for their work; from then on
// any device use raises. Nothing when the runtime was never initialised or
// is finalized already.
void finalize_runtime();

} // namespace c10_npu
