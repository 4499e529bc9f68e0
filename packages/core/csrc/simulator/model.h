// Models: stream work captured once and replayed (aclmdlRICapture*,
// aclmdlRIExecuteAsync, aclmdlRIDestroy), what NPUGraph builds on.
//
// Between aclmdlRICaptureBegin and aclmdlRICaptureEnd, work enqueued on the
// capturing stream (host-function work, copies, memsets, event records and
// waits) is appended to the stream's model instead of running. Replaying
// enqueues the captured items in capture order, as if they had just been
// launched:
//
// - host-function work runs again with its context (Note [Device work items
//   run many times], core's NPUWork.h); the model releases it when it is
//   destroyed, after its last replay ran;
// - an event recorded during capture gets a new generation at each replay,
//   and a captured wait for it waits for that replay's generation
//   (generations are resolved at replay, not at capture);
// - timing, activity records and device-work errors behave as for work
//   launched directly;
// - with the race detector on (Note [Stream race detection]), each item's
//   declared accesses, and the captured records and waits between lanes,
//   are checked at the replay as if the items were launched then, on the
//   stream that replays them; a race stops the replay there (the items
//   before it are enqueued) and fails aclmdlRIExecuteAsync.
//
// Synchronising with a capturing stream, or with its device (a GLOBAL mode
// capture also forbids synchronous copies anywhere), fails with
// ACL_ERROR_RT_STREAM_CAPTURED and invalidates the capture: capturing the
// host waiting for device results would replay nothing of the sort.
// aclmdlRICaptureEnd then fails with ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED.
//
// Several streams capture into one model as with CUDA's fork and join: a
// stream that waits for an event recorded in a capture joins it (a "lane"
// of the model; the capturing stream is lane 0), and its work is captured
// from then on, after that wait. aclmdlRICaptureEnd, on the stream that
// began the capture, requires every joined stream to have joined back: the
// last work (kernel, copy, memset) of each lane must be ordered before the
// end of lane 0 by events (else ACL_ERROR_RT_STREAM_UNJOINED, and the
// capture is invalidated); the joined streams then stop capturing. A
// replay runs lane 0 on the replay stream and each other lane on a stream
// the model owns, with the captured records and waits between them, so a
// replay's work is complete when the replay stream reaches its end.
//
// A capture that waits for an event recorded outside it and not yet
// complete fails with ACL_ERROR_RT_CAPTURE_DEPENDENCY: replays would not
// repeat that dependency.
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

  // ---- capture (the capturing streams' producers) ----
  // `stream` joins the capture (it waits for an event recorded in it):
  // ACL_ERROR_RT_CAPTURE_DEPENDENCY if it is on another device.
  aclError join(Stream* stream, const char* api);
  // Each takes the capturing (or joined) stream that enqueues. Host-function
  // work is owned from now on; copies and memsets are copied.
  // `accesses` (may be null): what the item declared it reads and writes,
  // checked by the race detector at each replay.
  void append(Stream* stream, const WorkItem& item, const DeclaredAccesses* accesses);
  void appendRecord(Stream* stream, Event* event);
  // ACL_SUCCESS, or ACL_ERROR_RT_CAPTURE_DEPENDENCY (and the model is
  // invalidated) when `event`'s pending record is not part of the capture.
  aclError appendWait(Stream* stream, Event* event, const char* api);
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
  // Capture ended: the joined streams stop capturing, the events recorded
  // in it are ordinary events again, and the model is invalidated if a
  // joined stream did not join back (ACL_ERROR_RT_STREAM_UNJOINED, which
  // unjoinedError() then returns; ACL_SUCCESS otherwise).
  void endCapture();
  aclError unjoinedError() const {
    return unjoined_ ? ACL_ERROR_RT_STREAM_UNJOINED : ACL_SUCCESS;
  }
  // Whether `stream` is part of this capture (lane 0 or joined).
  bool captures(const Stream* stream);

  // ---- replay ----
  aclError execute(Stream* stream);

  // aclmdlRIDebugJsonPrint: the model's lanes and items as JSON.
  std::string debugJson();

 private:
  struct CapturedRecord {
    Event* event;
    size_t slot; // this record's generation at the current replay
  };
  struct CapturedWait {
    Event* event;
    size_t slot; // the captured record it waits for
  };
  using Work = std::variant<CopyWork, MemsetWork, UserWork, CapturedRecord, CapturedWait>;
  struct Item {
    uint32_t lane; // the stream it was captured on (lanes_)
    Work work;
    // Note [Stream race detection]: the item's declared accesses, checked
    // at each replay as if it were launched then; null name: captured
    // while the detector was off (not checked).
    const char* race_name = nullptr;
    std::vector<npuSimMemAccess> accesses = {};
  };

  uint32_t laneLocked(const Stream* stream) const;
  // The race detector's view of replaying `item` on `on`.
  static aclError checkRace(const Item& item, Stream* on);
  // True when every lane's last work is ordered before lane 0's last item.
  bool allJoinedLocked() const;
  // The streams replaying lanes 1.. (created at the first replay).
  aclError ensureLaneStreamsLocked();

  Stream* const origin_;
  const aclmdlRICaptureMode mode_;
  std::mutex mutex_; // capture appends may come from several threads
  std::vector<Item> items_;
  // The capturing streams: lanes_[0] is origin_, the others joined (and are
  // retained while the capture lasts).
  std::vector<Stream*> lanes_;
  std::vector<Stream*> lane_streams_; // the model's own, for lanes 1..
  std::unordered_map<Event*, size_t> last_record_slot_;
  std::vector<size_t> record_item_; // the item of each record slot
  size_t slots_ = 0;
  bool capturing_ = true;
  bool unjoined_ = false;
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
