// Stream capture, as the runtime layer sees it (c10/cuda's
// CUDAGraphsC10Utils.h): whether a stream captures, and the runtime's capture
// calls that NPUGraph (torch-npu-graph) builds on.
//
// Note [Stream capture]
// Between capture_begin and capture_end, work launched on the capturing
// stream is recorded into a model (CANN's aclmdlRI) instead of running;
// model_execute replays it. What this means for the rest of the runtime:
// - work items run once per replay (Note [Device work items run many
//   times], NPUWork.h);
// - memory a capture allocates comes from a private pool and stays the
//   graph's (Note [Private pools], NPUCachingAllocator.h);
// - the host cannot wait for captured work: synchronising with the
//   capturing stream or its device (torch.npu.synchronize, .item(), .cpu(),
//   an op whose output size depends on data, empty_cache) raises, and the
//   capture is invalidated (capture_end then raises too), as with CUDA.
// - other streams join the capture by waiting for an event recorded in it
//   (stream.wait_stream(capturing_stream)), and must join back before
//   capture_end (capturing_stream.wait_stream(stream)), as with CUDA.
// Capture needs CANN 8.1.RC1 or later (the simulator emulates it there).
//
// Note [Work beside a capture]
// Work launched on a stream that does not take part in a capture must not
// use memory the capture allocated: its contents exist only once the graph
// replays, so such work would read garbage (or write what a replay then
// overwrites), silently, on CUDA too. While any capture is underway
// (captures_underway(): one relaxed load otherwise), ops check the storages
// they use (NPUCachingAllocator's allocatedByCaptureUnderway) and raise,
// saying how to take part in the capture (fork and join).
#pragma once

#include <string>

#include "cann/acl_types.h"
#include "npu/Macros.h"
#include "npu/NPUStream.h"

namespace c10_npu {

// CANN's aclmdlRICaptureStatus values.
enum class CaptureStatus : int {
  None = 0,
  Active = 1,
  Invalidated = 2,
};

// CANN's aclmdlRICaptureMode values: what a capture forbids to other
// threads and streams (GLOBAL: synchronous copies anywhere, as CUDA's).
enum class CaptureMode : int {
  Global = 0,
  ThreadLocal = 1,
  Relaxed = 2,
};

// Whether the loaded runtime can capture (CANN >= 8.1.RC1).
TORCH_NPU_API bool is_capture_supported();

// Whether any capture begun with capture_begin has not ended yet, in this
// process (Note [Work beside a capture]).
TORCH_NPU_API bool captures_underway();

// None when the runtime cannot capture.
TORCH_NPU_API CaptureStatus stream_capture_status(const NPUStream& stream);
TORCH_NPU_API CaptureStatus current_stream_capture_status();
// The model `stream` captures into (the capture's identity, shared by the
// streams that joined it), or null when it does not capture. Makes no
// allocation (callable from an allocator's pool filter); the caller has the
// stream's device current.
TORCH_NPU_API aclmdlRI stream_capture_model(aclrtStream stream);

// The runtime's capture calls; each raises a c10::Error saying what went
// wrong (and which CANN release capture needs, where it is missing).
TORCH_NPU_API void capture_begin(const NPUStream& stream, CaptureMode mode = CaptureMode::Global);
TORCH_NPU_API aclmdlRI capture_end(const NPUStream& stream);
TORCH_NPU_API void model_execute(aclmdlRI model, const NPUStream& stream);
TORCH_NPU_API void model_destroy(aclmdlRI model);
// Writes a description of the model to `path` as JSON
// (aclmdlRIDebugJsonPrint).
TORCH_NPU_API void model_debug_dump(aclmdlRI model, const std::string& path);

} // namespace c10_npu
