// Models: stream work captured once and replayed (aclmdlRICapture*,
// aclmdlRIExecuteAsync, aclmdlRIDestroy), what NPUGraph builds on.
//
// Between aclmdlRICaptureBegin and aclmdlRICaptureEnd, work enqueued on the
// capturing stream (host-function work, copies, memsets, event records and
// waits) is appended to the stream's model instead of running. Replaying
// enqueues the captured items on a stream, in capture order, as if they had
// just been launched there:
//
// - host-function work runs again with its context (Note [Device work items
//   run many times], core's NPUWork.h); the model releases it when it is
//   destroyed, after its last replay ran;
// - an event recorded during capture gets a new generation at each replay,
//   and a captured wait for it waits for that replay's generation
//   (generations are resolved at replay, not at capture);
// - timing, activity records and device-work errors behave as for work
//   launched directly.
//
// Synchronising with a capturing stream, or with its device (a GLOBAL mode
// capture also forbids synchronous copies anywhere), fails with
// ACL_ERROR_RT_STREAM_CAPTURED and invalidates the capture: capturing the
// host waiting for device results would replay nothing of the sort.
// aclmdlRICaptureEnd then fails with ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED.
//
// Not simulated yet: one stream captures into a model; a capture that
// waits for an event recorded outside it, or another stream that waits for
// an event recorded inside it (CUDA's cross-stream capture), fails with
// ACL_ERROR_RT_CAPTURE_DEPENDENCY.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "acl_types.h"
#include "work_item.h"

namespace npu_sim {

class Event;
class Stream;

class Model {
 public:
  Model(Stream* origin, aclmdlRICaptureMode mode);
  ~Model(); // waits for the replays, then releases the captured work
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // The model behind a handle, or null when it is not a live model.
  static Model* fromHandle(aclmdlRI handle);
  aclmdlRI handle() {
    return this;
  }

  // ---- capture (the capturing stream's producers) ----
  // Takes host-function work (owned from now on), copies and memsets.
  void append(const WorkItem& item);
  void appendRecord(Event* event);
  // ACL_SUCCESS, or ACL_ERROR_RT_CAPTURE_DEPENDENCY (and the model is
  // invalidated) when `event`'s pending record is not part of the capture.
  aclError appendWait(Event* event, const char* api);
  void invalidate(const std::string& why);
  bool invalidated() const {
    return invalidated_.load(std::memory_order_acquire);
  }
  const std::string& invalidatedBecause() const {
    return invalidated_because_;
  }
  aclmdlRICaptureMode mode() const {
    return mode_;
  }
  Stream* origin() const {
    return origin_;
  }
  // Capture ended: the events recorded in it are ordinary events again.
  void endCapture();

  // ---- replay ----
  aclError execute(Stream* stream);

 private:
  struct CapturedRecord {
    Event* event;
    size_t slot; // this record's generation at the current replay
  };
  struct CapturedWait {
    Event* event;
    size_t slot; // the captured record it waits for
  };
  using Item = std::variant<CopyWork, MemsetWork, UserWork, CapturedRecord, CapturedWait>;

  Stream* const origin_;
  const aclmdlRICaptureMode mode_;
  std::mutex mutex_; // capture appends may come from several threads
  std::vector<Item> items_;
  std::unordered_map<Event*, size_t> last_record_slot_;
  size_t slots_ = 0;
  std::atomic<bool> invalidated_{false};
  std::string invalidated_because_;
  // The last item of each replay, waited for before the work is released.
  std::vector<std::pair<Stream*, uint64_t>> replays_;
};

// The captures underway (between aclmdlRICaptureBegin and End).
void registerCapture(Model* model);
void unregisterCapture(Model* model);
// One underway on a stream of `device`, or in GLOBAL mode anywhere; null
// if none.
Model* captureOnDevice(uint32_t device);
Model* globalCapture();

// Fails `api` with `code` (ACL_ERROR_RT_STREAM_CAPTURED by default) because
// it would synchronise with the capture of `model`, and invalidates it.
aclError refuseDuringCapture(Model* model, const char* api, const char* what,
                             aclError code = ACL_ERROR_RT_STREAM_CAPTURED);

} // namespace npu_sim
