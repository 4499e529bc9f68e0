// Streams, events and launched device work.
#include "api_impl.h"
#include "device.h"
#include "errors.h"
#include "event.h"
#include "model.h"
#include "race_detector.h"
#include "runtime.h"
#include "stream.h"

namespace npu_sim::impl {
namespace {

// aclrtDeviceGetStreamPriorityRange: 0 is the highest priority.
constexpr int32_t kGreatestPriority = 0;
constexpr int32_t kLeastPriority = 7;

aclError eventOrFail(aclrtEvent handle, const char* api, Event** out) {
  Event* event = Event::fromHandle(handle);
  if (event == nullptr) {
    return fail(ACL_ERROR_RT_PARAM_INVALID,
                "%s: %p is not a live event (destroyed, or not created by "
                "aclrtCreateEventWithFlag)",
                api, handle);
  }
  *out = event;
  return ACL_SUCCESS;
}

aclError selfWait(const char* api) {
  return fail(ACL_ERROR_RT_PARAM_INVALID,
              "%s: device work cannot wait for its own stream (it would wait for itself)", api);
}

// A wait cut short because the process is exiting: the work it waited for
// was abandoned and never runs. Success, so that destructors synchronizing
// at exit do not fail (see runtime.h).
aclError abandonedAtExit() {
  return ACL_SUCCESS;
}

} // namespace

// ---------------------------------------------------------------------------
// Streams

aclError createStream(aclrtStream* stream, uint32_t priority, uint32_t flag) {
  const char* api = "aclrtCreateStreamWithConfig";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (stream == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: stream is null", api);
  }
  if (priority > static_cast<uint32_t>(kLeastPriority)) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: priority %u is outside [%d (highest), %d (lowest)]", api, priority,
                kGreatestPriority, kLeastPriority);
  }
  Device* device = nullptr;
  if (aclError err = rt.currentDevice(api, &device); err != ACL_SUCCESS) {
    return err;
  }
  auto* s = new Stream(device->id(), priority, flag, /*is_default=*/false);
  device->addStream(s);
  *stream = s->handle();
  return ACL_SUCCESS;
}

aclError destroyStream(aclrtStream stream) {
  const char* api = "aclrtDestroyStream";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (stream == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: stream is null", api);
  }
  Stream* s = nullptr;
  if (aclError err = rt.stream(stream, api, &s); err != ACL_SUCCESS) {
    return err;
  }
  if (s->isDefault()) {
    return fail(ACL_ERROR_RT_PARAM_INVALID, "%s: the default stream cannot be destroyed", api);
  }
  if (Stream::current() == s) {
    return fail(ACL_ERROR_RT_PARAM_INVALID, "%s: device work cannot destroy its own stream",
                api);
  }
  rt.device(s->device()).removeStream(s);
  s->destroy(); // waits for queued work, joins the worker
  if (race::enabled()) {
    race::streamDestroyed(s);
  }
  s->release();
  return ACL_SUCCESS;
}

aclError synchronizeStream(aclrtStream stream, bool ordersHost) {
  const char* api = ordersHost ? "aclrtSynchronizeStream" : "npuSimSynchronizeStreamUnordered";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  Stream* s = nullptr;
  if (aclError err = rt.stream(stream, api, &s); err != ACL_SUCCESS) {
    return err;
  }
  if (Stream::current() == s) {
    return selfWait(api);
  }
  if (Model* model = s->capture()) {
    return refuseDuringCapture(model, api, "synchronising with the capturing stream");
  }
  if (!s->waitFor(s->enqueued())) {
    return abandonedAtExit();
  }
  if (ordersHost && race::enabled()) {
    race::hostWaitedStream(s);
  }
  return reportWorkError(s->takeError());
}

aclError streamQuery(aclrtStream stream, aclrtStreamStatus* status) {
  const char* api = "aclrtStreamQuery";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (status == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: status is null", api);
  }
  Stream* s = nullptr;
  if (aclError err = rt.stream(stream, api, &s); err != ACL_SUCCESS) {
    return err;
  }
  if (Model* model = s->capture()) {
    return refuseDuringCapture(model, api, "querying the capturing stream");
  }
  *status = s->reached(s->enqueued()) ? ACL_STREAM_STATUS_COMPLETE : ACL_STREAM_STATUS_NOT_READY;
  if (race::enabled() && *status == ACL_STREAM_STATUS_COMPLETE) {
    race::hostWaitedStream(s);
  }
  return ACL_SUCCESS;
}

aclError streamWaitEvent(aclrtStream stream, aclrtEvent event) {
  const char* api = "aclrtStreamWaitEvent";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  Stream* s = nullptr;
  Event* e = nullptr;
  if (aclError err = rt.stream(stream, api, &s); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = eventOrFail(event, api, &e); err != ACL_SUCCESS) {
    return err;
  }
  // Capture (model.h): the wait becomes part of the model.
  if (Model* model = s->capture()) {
    return model->appendWait(s, e, api);
  }
  // A stream that waits for an event recorded in a capture joins it (CUDA's
  // fork into a capture): its work is captured from now on.
  if (Model* model = e->capturedBy()) {
    if (aclError err = model->join(s, api); err != ACL_SUCCESS) {
      return err;
    }
    return model->appendWait(s, e, api);
  }
  // The latest record at call time. Never recorded, or already reached:
  // nothing later on `s` can start before it, so no wait is queued.
  const uint64_t generation = e->latest();
  if (generation == 0) {
    return ACL_SUCCESS;
  }
  if (race::enabled()) {
    race::streamWaitedEvent(s, e);
  }
  if (e->isComplete(generation)) {
    // Note [Device-work errors follow the dependencies] (event.h).
    s->inheritFailure(e->errorOf(generation));
    return ACL_SUCCESS;
  }
  // Note [Implied stream waits] (stream.cpp).
  auto [recorder, item] = e->recorder(generation);
  const bool implied = recorder != nullptr && recorder->impliedBy(item, s);
  if (recorder != nullptr) {
    recorder->release();
  }
  if (aclError err = s->ensureWorker(); err != ACL_SUCCESS) {
    return err;
  }
  e->retain(); // dropped by the worker after the wait
  // `recorder` is compared by address only, never used: a stream destroyed
  // meanwhile ran all its records first, so its address, if reused, cannot
  // make a wait implied wrongly. An implied wait does not block the stream
  // but completes the record when the stream gets to it.
  s->enqueueMarker(WaitWork{e, generation, implied}, /*wait=*/true, recorder);
  return ACL_SUCCESS;
}

aclError streamPriorityRange(int32_t* leastPriority, int32_t* greatestPriority) {
  if (leastPriority == nullptr || greatestPriority == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtDeviceGetStreamPriorityRange: an output pointer is null");
  }
  *leastPriority = kLeastPriority;
  *greatestPriority = kGreatestPriority;
  return ACL_SUCCESS;
}

aclError streamGetDevice(aclrtStream stream, int32_t* deviceId) {
  const char* api = "npuSimStreamGetDevice";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (deviceId == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: deviceId is null", api);
  }
  Stream* s = nullptr;
  if (aclError err = rt.stream(stream, api, &s); err != ACL_SUCCESS) {
    return err;
  }
  *deviceId = static_cast<int32_t>(s->device());
  return ACL_SUCCESS;
}

aclError launchWork(aclrtStream stream, const npuSimWork* work, uint64_t* workId) {
  return launchWork(stream, work, nullptr, 0, workId);
}

aclError launchWork(aclrtStream stream, const npuSimWork* work, const npuSimMemAccess* accesses,
                    size_t count, uint64_t* workId) {
  // On failure the simulator did not take the work: it never calls
  // work->release, the caller still owns ctx.
  const char* api = "npuSimLaunchWork";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (work == nullptr || work->run == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: %s is null", api,
                work == nullptr ? "work" : "work->run");
  }
  if (accesses == nullptr && count != 0) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: accesses is null but count is %zu", api, count);
  }
  Stream* s = nullptr;
  if (aclError err = rt.stream(stream, api, &s); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = s->ensureWorker(); err != ACL_SUCCESS) {
    return err;
  }
  const DeclaredAccesses declared{work->name != nullptr ? work->name : "device work", accesses,
                                  count};
  const bool race_check = race::enabled();
  if (race_check && s->capture() == nullptr) {
    if (aclError err = race::launch(s, declared.name, accesses, count); err != ACL_SUCCESS) {
      return err;
    }
  }
  const uint64_t id = nextWorkId();
  // A capturing stream's model keeps the accesses for its replays.
  s->enqueue(UserWork{*work, id}, race_check ? &declared : nullptr);
  if (workId != nullptr) {
    *workId = id;
  }
  return ACL_SUCCESS;
}

// ---------------------------------------------------------------------------
// Events

aclError createEvent(aclrtEvent* event, uint32_t flag) {
  // Every flag is accepted; only ACL_EVENT_TIME_LINE changes behaviour
  // (aclrtEventElapsedTime).
  const char* api = "aclrtCreateEventWithFlag";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (event == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: event is null", api);
  }
  Device* device = nullptr;
  if (aclError err = rt.currentDevice(api, &device); err != ACL_SUCCESS) {
    return err;
  }
  *event = Event::create(flag)->handle();
  return ACL_SUCCESS;
}

aclError destroyEvent(aclrtEvent event) {
  const char* api = "aclrtDestroyEvent";
  if (aclError err = Runtime::get().check(api); err != ACL_SUCCESS) {
    return err;
  }
  Event* e = nullptr;
  if (aclError err = eventOrFail(event, api, &e); err != ACL_SUCCESS) {
    return err;
  }
  if (race::enabled()) {
    race::eventDestroyed(e);
  }
  e->destroy(); // queued records and waits keep it alive until they ran
  return ACL_SUCCESS;
}

aclError recordEvent(aclrtEvent event, aclrtStream stream) {
  const char* api = "aclrtRecordEvent";
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  Event* e = nullptr;
  Stream* s = nullptr;
  if (aclError err = eventOrFail(event, api, &e); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = rt.stream(stream, api, &s); err != ACL_SUCCESS) {
    return err;
  }
  if (e->isOpened()) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: the event was opened from another process (aclrtIpcOpenEventHandle); only "
                "the process that created it records it, others wait for it",
                api);
  }
  if (Model* model = s->capture()) {
    model->appendRecord(s, e); // a generation at each replay (model.h)
    return ACL_SUCCESS;
  }
  if (aclError err = s->ensureWorker(); err != ACL_SUCCESS) {
    return err;
  }
  e->setCapturedBy(nullptr); // recorded for real again
  if (race::enabled()) {
    race::eventRecorded(e, s);
  }
  const uint64_t generation = e->beginRecord();
  e->retain(); // dropped by the worker after completing the record
  const uint64_t item = s->enqueueMarker(RecordWork{e, generation}, /*wait=*/false, nullptr);
  e->noteRecorder(generation, s, item);
  return ACL_SUCCESS;
}

aclError queryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
  const char* api = "aclrtQueryEventStatus";
  if (aclError err = Runtime::get().check(api); err != ACL_SUCCESS) {
    return err;
  }
  Event* e = nullptr;
  if (aclError err = eventOrFail(event, api, &e); err != ACL_SUCCESS) {
    return err;
  }
  if (status == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: status is null", api);
  }
  if (Model* model = e->capturedBy()) {
    return refuseDuringCapture(model, api, "querying an event recorded in the capture",
                               ACL_ERROR_RT_EVENT_CAPTURED);
  }
  // Never recorded counts as complete (nothing to wait for).
  *status = e->isComplete(e->latest()) ? ACL_EVENT_RECORDED_STATUS_COMPLETE
                                       : ACL_EVENT_RECORDED_STATUS_NOT_READY;
  if (race::enabled() && *status == ACL_EVENT_RECORDED_STATUS_COMPLETE) {
    race::hostWaitedEvent(e);
  }
  return ACL_SUCCESS;
}

aclError synchronizeEvent(aclrtEvent event) {
  const char* api = "aclrtSynchronizeEvent";
  if (aclError err = Runtime::get().check(api); err != ACL_SUCCESS) {
    return err;
  }
  Event* e = nullptr;
  if (aclError err = eventOrFail(event, api, &e); err != ACL_SUCCESS) {
    return err;
  }
  if (Model* model = e->capturedBy()) {
    return refuseDuringCapture(model, api, "synchronising with an event recorded in the capture",
                               ACL_ERROR_RT_EVENT_CAPTURED);
  }
  const uint64_t generation = e->latest();
  if (generation == 0) {
    return ACL_SUCCESS;
  }
  // Through the recording stream first (see Event::recorder): the waiter
  // runs the record itself when that stream's worker is idle.
  if (auto [s, item] = e->recorder(generation); s != nullptr) {
    const bool reached = Stream::current() == s || s->waitFor(item);
    s->release();
    if (!reached) {
      return abandonedAtExit();
    }
  }
  if (!e->wait(generation)) {
    return abandonedAtExit();
  }
  if (race::enabled()) {
    race::hostWaitedEvent(e);
  }
  return reportWorkError(e->state().error);
}

aclError eventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) {
  const char* api = "aclrtEventElapsedTime";
  if (aclError err = Runtime::get().check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (ms == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: ms is null", api);
  }
  Event* start = nullptr;
  Event* end = nullptr;
  if (aclError err = eventOrFail(startEvent, api, &start); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = eventOrFail(endEvent, api, &end); err != ACL_SUCCESS) {
    return err;
  }
  if (!start->timing() || !end->timing()) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "%s: the %s event was created without ACL_EVENT_TIME_LINE, so it has no "
                "timestamp",
                api, !start->timing() ? "start" : "end");
  }
  const Event::State s = start->state();
  const Event::State e = end->state();
  if (s.latest == 0 || e.latest == 0) {
    return fail(ACL_ERROR_RT_EVENT_NOT_COMPLETE, "%s: the %s event was never recorded", api,
                s.latest == 0 ? "start" : "end");
  }
  if (!s.complete || !e.complete) {
    return fail(ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                "%s: the %s event has not completed yet (synchronize it first)", api,
                !s.complete ? "start" : "end");
  }
  *ms = static_cast<float>(static_cast<double>(e.timestamp_ns - s.timestamp_ns) / 1e6);
  return ACL_SUCCESS;
}

} // namespace npu_sim::impl
