// mstx: marks and ranges a program puts on its own timeline
// (torch_npu.npu.mstx, as Ascend documents it; on CANN the same calls go to
// libms_tools_ext's mstxMarkA / mstxRangeStartA / mstxRangeEnd). Here they
// become device activity records (NPUActivity.h, Kind::Mstx) that profilers
// flush with the kernels.
//
// Note [mstx records]
// - A mark is one record with end_ns == start_ns; a range is one record
//   from its start to its end call. Host records have stream 0, the device
//   current at the call, the message as name, the domain, and the native id
//   of the calling thread (threading.get_native_id()).
// - With a stream, the call also enqueues untraced host work on that stream
//   (WorkFlags::Untraced, NPUWork.h) that takes a timestamp when the stream
//   reaches it: a second record, with that stream, whose start and end are
//   those device-side times. A device range therefore covers exactly the
//   work enqueued on the stream between its start and end calls, and shows
//   nothing of the host's own pace.
// - range_start/range_end pair by id, across threads; ids are process-wide
//   and never 0. range_push/range_pop nest per thread and per domain.
// - While activity recording is off the calls record nothing and enqueue
//   nothing: they keep the bookkeeping (ids, the push stack), so that pairs
//   stay checkable, which costs a map insertion or a vector push. A range
//   is recorded when recording is on at both its ends.
// - Misuse is an error at the call: ending an id no range_start returned
//   (or one already ended), ending it in another domain than it started in,
//   popping a domain with nothing pushed on this thread, an empty message
//   or domain.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "npu/Macros.h"
#include "npu/NPUStream.h"

namespace c10_npu::mstx {

// The domain of calls that name none.
inline constexpr const char* kDefaultDomain = "default";

// An instant on the host timeline (and on `stream`'s, when given).
TORCH_NPU_API void mark(
    const std::string& message, const std::optional<NPUStream>& stream, const std::string& domain);

// Starts a range; returns its id (never 0), which range_end takes, on any
// thread.
TORCH_NPU_API uint64_t range_start(
    const std::string& message, const std::optional<NPUStream>& stream, const std::string& domain);

TORCH_NPU_API void range_end(uint64_t range_id, const std::string& domain);

// Nested ranges of the calling thread within `domain`. Both return the
// nesting depth of the range they open or close (0 for the outermost).
TORCH_NPU_API int range_push(
    const std::string& message, const std::optional<NPUStream>& stream, const std::string& domain);
TORCH_NPU_API int range_pop(const std::string& domain);

} // namespace c10_npu::mstx
