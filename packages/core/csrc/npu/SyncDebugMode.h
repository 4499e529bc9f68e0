// torch.npu.set_sync_debug_mode: warn about, or refuse, the operations that
// make the host wait for the device, as torch.cuda.set_sync_debug_mode.
//
// Note [Synchronizing operations]
// These operations call warn_or_error_on_sync() before the host waits for
// the device, as their CUDA counterparts do:
//   - tensor.item();
//   - every copy between npu and host memory with non_blocking=False, in
//     either direction (.cpu(), .tolist(), printing, torch.tensor(...,
//     device="npu")). A staged host-to-device copy (Note [Staged
//     host-to-device copies]) does not wait here, but counts as on CUDA,
//     where such a copy waits: the mode's verdict on a program must not
//     depend on how busy the stream happened to be;
//   - ops whose result sizes depend on the values (nonzero, masked_select,
//     unique, boolean-mask indexing, ...: torch-npu-ops' executor).
// Explicit waits (torch.npu.synchronize, Stream/Event.synchronize, a
// collective's wait) are what the user asked for and never warn, as on
// CUDA. Neither does the executor's other synchronous path, taken for ops
// whose meta kernel is missing or still loading: it is how this backend
// runs them, not something the program could avoid. The mode is global to
// the process, as on CUDA.
#pragma once

#include <cstdint>

#include "npu/Macros.h"

namespace c10_npu {

enum class SyncDebugMode : int8_t {
  Default = 0, // say nothing
  Warn = 1,    // warn at each synchronizing operation
  Error = 2,   // raise instead of waiting
};

TORCH_NPU_API void set_sync_debug_mode(SyncDebugMode mode);
TORCH_NPU_API SyncDebugMode get_sync_debug_mode();

// Called by a synchronizing operation before the host waits (Note
// [Synchronizing operations]): warns or raises as the mode says.
TORCH_NPU_API void warn_or_error_on_sync();

} // namespace c10_npu
