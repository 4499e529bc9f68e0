#include "model.h"

#include <algorithm>
#include <type_traits>
#include <unordered_set>

#include "errors.h"
#include "device.h"
#include "event.h"
#include "race_detector.h"
#include "runtime.h"
#include "stream.h"
#include "util.h"

namespace npu_sim {

namespace {

// Live models: a handle is checked against this set, never dereferenced
// first (a stale or made-up handle must fail cleanly, not crash).
std::mutex g_models_mutex;
std::unordered_set<const Model*> g_models; // behind g_models_mutex

} // namespace

Model::Model(Stream* origin, aclmdlRICaptureMode mode) : origin_(origin), mode_(mode) {
  origin_->retain();
  lanes_.push_back(origin_);
  std::lock_guard lock(g_models_mutex);
  g_models.insert(this);
}

Model::~Model() {
  {
    std::lock_guard lock(g_models_mutex);
    g_models.erase(this);
  }
  for (auto& [stream, last] : replays_) {
    stream->waitFor(last);
    stream->release();
  }
  // Reaching a replay's end on the replay stream covers its other lanes
  // (every lane joined back), so these are idle.
  for (Stream* s : lane_streams_) {
    if (s != nullptr) {
      Runtime::get().device(s->device()).removeStream(s);
      s->destroy();
      s->release();
    }
  }
  for (Item& item : items_) {
    std::visit(
        [](auto& w) {
          using W = std::decay_t<decltype(w)>;
          if constexpr (std::is_same_v<W, UserWork>) {
            if (w.work.release != nullptr) {
              w.work.release(w.work.ctx);
            }
          } else if constexpr (std::is_same_v<W, CapturedRecord> || std::is_same_v<W, CapturedWait>) {
            w.event->release();
          }
        },
        item.work);
  }
  if (capturing_) {
    // Destroyed without aclmdlRICaptureEnd (the runtime is finalising).
    for (size_t lane = 1; lane < lanes_.size(); ++lane) {
      lanes_[lane]->setCapture(nullptr);
      lanes_[lane]->release();
    }
  }
  origin_->release();
}

Model* Model::fromHandle(aclmdlRI handle) {
  auto* model = static_cast<Model*>(handle);
  std::lock_guard lock(g_models_mutex);
  return g_models.count(model) != 0 ? model : nullptr;
}

uint32_t Model::laneLocked(const Stream* stream) const {
  for (size_t lane = 0; lane < lanes_.size(); ++lane) {
    if (lanes_[lane] == stream) {
      return static_cast<uint32_t>(lane);
    }
  }
  return 0; // not reached: only capturing streams append
}

bool Model::captures(const Stream* stream) {
  std::lock_guard lock(mutex_);
  return capturing_ && std::find(lanes_.begin(), lanes_.end(), stream) != lanes_.end();
}

aclError Model::join(Stream* stream, const char* api) {
  std::lock_guard lock(mutex_);
  if (stream->device() != origin_->device()) {
    invalidated_because_ = strFormat(
        "%s: stream %p of device %u waits for an event recorded in a capture on device %u; a "
        "model captures the streams of one device",
        api, static_cast<void*>(stream), stream->device(), origin_->device());
    invalidated_.store(true, std::memory_order_release);
    return fail(ACL_ERROR_RT_CAPTURE_DEPENDENCY, "%s", invalidated_because_.c_str());
  }
  stream->retain(); // released at the end of the capture
  lanes_.push_back(stream);
  stream->setCapture(this);
  return ACL_SUCCESS;
}

void Model::append(Stream* stream, const WorkItem& item, const DeclaredAccesses* accesses) {
  std::lock_guard lock(mutex_);
  const uint32_t lane = laneLocked(stream);
  std::visit(
      [&](const auto& w) {
        using W = std::decay_t<decltype(w)>;
        if constexpr (std::is_same_v<W, CopyWork> || std::is_same_v<W, MemsetWork> ||
                      std::is_same_v<W, UserWork>) {
          items_.push_back(Item{lane, w});
          if (accesses != nullptr) {
            items_.back().race_name = accesses->name;
            items_.back().accesses.assign(accesses->accesses, accesses->accesses + accesses->count);
          }
        }
        // Records and waits come through appendRecord and appendWait.
      },
      item);
}

void Model::appendRecord(Stream* stream, Event* event) {
  std::lock_guard lock(mutex_);
  event->retain(); // released with the model
  const size_t slot = slots_++;
  last_record_slot_[event] = slot;
  record_item_.push_back(items_.size());
  items_.push_back(Item{laneLocked(stream), CapturedRecord{event, slot}});
  event->setCapturedBy(this);
}

aclError Model::appendWait(Stream* stream, Event* event, const char* api) {
  std::lock_guard lock(mutex_);
  auto it = last_record_slot_.find(event);
  if (it != last_record_slot_.end() && event->capturedBy() == this) {
    event->retain();
    items_.push_back(Item{laneLocked(stream), CapturedWait{event, it->second}});
    return ACL_SUCCESS;
  }
  const uint64_t generation = event->latest();
  if (generation == 0 || event->isComplete(generation)) {
    return ACL_SUCCESS; // nothing to wait for, at capture or at any replay
  }
  invalidated_because_ = std::string(api) +
      ": a capturing stream waits for an event recorded outside the capture and not complete yet "
      "(a dependency on work that replays would not repeat); record the event inside the "
      "capture, or synchronise before the capture begins";
  invalidated_.store(true, std::memory_order_release);
  return fail(ACL_ERROR_RT_CAPTURE_DEPENDENCY, "%s", invalidated_because_.c_str());
}

void Model::invalidate(const std::string& why) {
  std::lock_guard lock(mutex_);
  if (!invalidated_.load(std::memory_order_relaxed)) {
    invalidated_because_ = why;
    invalidated_.store(true, std::memory_order_release);
  }
}

bool Model::allJoinedLocked() const {
  if (lanes_.size() == 1) {
    return true;
  }
  // Walk back from lane 0's last item through the lanes' orders and the
  // captured waits' records; every lane's last piece of work must be
  // reached. Records and waits after it are no work (as in a CUDA graph,
  // where they are no nodes): a future's completion event recorded on a
  // communicator stream after the collective need not be waited for.
  std::vector<size_t> last_of_lane(lanes_.size(), SIZE_MAX);
  std::vector<size_t> last_work_of_lane(lanes_.size(), SIZE_MAX);
  std::vector<size_t> previous(items_.size(), SIZE_MAX); // previous item of the same lane
  for (size_t i = 0; i < items_.size(); ++i) {
    const uint32_t lane = items_[i].lane;
    previous[i] = last_of_lane[lane];
    last_of_lane[lane] = i;
    const auto& work = items_[i].work;
    if (!std::holds_alternative<CapturedRecord>(work) && !std::holds_alternative<CapturedWait>(work)) {
      last_work_of_lane[lane] = i;
    }
  }
  if (last_of_lane[0] == SIZE_MAX) {
    return false;
  }
  std::vector<bool> reached(items_.size(), false);
  std::vector<size_t> todo{last_of_lane[0]};
  reached[last_of_lane[0]] = true;
  const auto visit = [&](size_t i) {
    if (i != SIZE_MAX && !reached[i]) {
      reached[i] = true;
      todo.push_back(i);
    }
  };
  while (!todo.empty()) {
    const size_t i = todo.back();
    todo.pop_back();
    visit(previous[i]);
    if (const auto* wait = std::get_if<CapturedWait>(&items_[i].work)) {
      visit(record_item_[wait->slot]);
    }
  }
  for (size_t lane = 1; lane < lanes_.size(); ++lane) {
    if (last_work_of_lane[lane] != SIZE_MAX && !reached[last_work_of_lane[lane]]) {
      return false;
    }
  }
  return true;
}

void Model::endCapture() {
  std::lock_guard lock(mutex_);
  capturing_ = false;
  for (auto& [event, slot] : last_record_slot_) {
    if (event->capturedBy() == this) {
      event->setCapturedBy(nullptr);
    }
  }
  if (!allJoinedLocked()) {
    unjoined_ = true;
    if (!invalidated_.load(std::memory_order_relaxed)) {
      invalidated_because_ =
          "a stream that joined the capture (by waiting for an event recorded in it) did not join "
          "back: make the capturing stream wait for the last work of every such stream (e.g. "
          "capturing_stream.wait_stream(side_stream)) before ending the capture";
      invalidated_.store(true, std::memory_order_release);
    }
  }
  for (size_t lane = 1; lane < lanes_.size(); ++lane) {
    lanes_[lane]->setCapture(nullptr);
    lanes_[lane]->release();
  }
  lanes_.resize(1);
}

aclError Model::ensureLaneStreamsLocked() {
  const size_t lanes = lane_streams_.size();
  if (lanes != 0) {
    return ACL_SUCCESS;
  }
  uint32_t count = 1;
  for (const Item& item : items_) {
    count = std::max(count, item.lane + 1);
  }
  lane_streams_.assign(count, nullptr); // lane 0 replays on the caller's stream
  for (uint32_t lane = 1; lane < count; ++lane) {
    auto* s = new Stream(origin_->device(), 0, 0, /*is_default=*/false);
    Runtime::get().device(origin_->device()).addStream(s);
    lane_streams_[lane] = s;
    if (aclError err = s->ensureWorker(); err != ACL_SUCCESS) {
      return err;
    }
  }
  return ACL_SUCCESS;
}

aclError Model::execute(Stream* stream) {
  std::lock_guard lock(mutex_);
  if (aclError err = stream->ensureWorker(); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = ensureLaneStreamsLocked(); err != ACL_SUCCESS) {
    return err;
  }
  // This replay's generation of each captured record.
  std::vector<uint64_t> generations(slots_, 0);
  uint64_t last = 0;
  aclError raced = ACL_SUCCESS;
  const bool race_check = race::enabled();
  for (Item& item : items_) {
    Stream* on = item.lane == 0 ? stream : lane_streams_[item.lane];
    if (race_check) {
      raced = checkRace(item, on);
      if (raced != ACL_SUCCESS) {
        break;
      }
    }
    uint64_t number = 0;
    std::visit(
        [&](auto& w) {
          using W = std::decay_t<decltype(w)>;
          if constexpr (std::is_same_v<W, CopyWork> || std::is_same_v<W, MemsetWork>) {
            number = on->enqueue(w);
          } else if constexpr (std::is_same_v<W, UserWork>) {
            // The model keeps the work: no release after this run, and no
            // launcher waits for it.
            npuSimWork work = w.work;
            work.release = nullptr;
            work.flags &= ~NPU_SIM_WORK_AWAITED;
            number = on->enqueue(UserWork{work, nextWorkId()});
          } else if constexpr (std::is_same_v<W, CapturedRecord>) {
            const uint64_t generation = w.event->beginRecord();
            w.event->retain(); // dropped by the worker after the record
            number = on->enqueue(RecordWork{w.event, generation});
            w.event->noteRecorder(generation, on, number);
            generations[w.slot] = generation;
          } else if constexpr (std::is_same_v<W, CapturedWait>) {
            w.event->retain(); // dropped by the worker after the wait
            number = on->enqueue(WaitWork{w.event, generations[w.slot]});
          }
        },
        item.work);
    if (item.lane == 0) {
      last = number;
    }
  }
  if (last != 0) {
    stream->retain();
    replays_.emplace_back(stream, last);
  }
  return raced;
}

aclError Model::checkRace(const Item& item, Stream* on) {
  if (const auto* record = std::get_if<CapturedRecord>(&item.work)) {
    race::eventRecorded(record->event, on);
  } else if (const auto* wait = std::get_if<CapturedWait>(&item.work)) {
    race::streamWaitedEvent(on, wait->event);
  } else if (item.race_name != nullptr) {
    return race::launch(on, item.race_name, item.accesses.data(), item.accesses.size());
  }
  return ACL_SUCCESS;
}

std::string Model::debugJson() {
  std::lock_guard lock(mutex_);
  const auto quoted = [](const char* text) {
    std::string out = "\"";
    for (const char* c = text != nullptr ? text : ""; *c != '\0'; ++c) {
      if (*c == '"' || *c == '\\') {
        out += '\\';
      }
      out += static_cast<unsigned char>(*c) < 0x20 ? ' ' : *c;
    }
    return out + "\"";
  };
  uint32_t lanes = 1;
  for (const Item& item : items_) {
    lanes = std::max(lanes, item.lane + 1);
  }
  std::string json = strFormat(
      "{\n  \"model\": \"%p\",\n  \"device\": %u,\n  \"capture_mode\": %d,\n  \"lanes\": %u,\n"
      "  \"replays\": %zu,\n  \"items\": [",
      static_cast<void*>(this), origin_->device(), static_cast<int>(mode_), lanes, replays_.size());
  for (size_t i = 0; i < items_.size(); ++i) {
    const Item& item = items_[i];
    std::string entry = std::visit(
        [&](const auto& w) -> std::string {
          using W = std::decay_t<decltype(w)>;
          if constexpr (std::is_same_v<W, CopyWork>) {
            return strFormat("\"kind\": \"memcpy\", \"bytes\": %zu", w.count);
          } else if constexpr (std::is_same_v<W, MemsetWork>) {
            return strFormat("\"kind\": \"memset\", \"bytes\": %zu, \"value\": %d", w.count, w.value);
          } else if constexpr (std::is_same_v<W, UserWork>) {
            return "\"kind\": \"kernel\", \"name\": " + quoted(w.work.name);
          } else if constexpr (std::is_same_v<W, CapturedRecord>) {
            return strFormat("\"kind\": \"event_record\", \"event\": \"%p\", \"record\": %zu",
                             static_cast<void*>(w.event), w.slot);
          } else {
            return strFormat("\"kind\": \"event_wait\", \"event\": \"%p\", \"record\": %zu",
                             static_cast<void*>(w.event), w.slot);
          }
        },
        item.work);
    json += strFormat("%s\n    {\"index\": %zu, \"lane\": %u, ", i == 0 ? "" : ",", i, item.lane) + entry + "}";
  }
  json += "\n  ]\n}\n";
  return json;
}

namespace {

std::mutex g_captures_mutex;
std::vector<Model*> g_captures; // behind g_captures_mutex

} // namespace

void registerCapture(Model* model) {
  std::lock_guard lock(g_captures_mutex);
  g_captures.push_back(model);
}

void unregisterCapture(Model* model) {
  std::lock_guard lock(g_captures_mutex);
  g_captures.erase(std::remove(g_captures.begin(), g_captures.end(), model), g_captures.end());
}

Model* captureOnDevice(uint32_t device) {
  std::lock_guard lock(g_captures_mutex);
  for (Model* model : g_captures) {
    if (model->origin()->device() == device) {
      return model;
    }
  }
  return nullptr;
}

Model* globalCapture() {
  std::lock_guard lock(g_captures_mutex);
  for (Model* model : g_captures) {
    if (model->mode() == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) {
      return model;
    }
  }
  return nullptr;
}

aclError refuseDuringCapture(Model* model, const char* api, const char* what, aclError code) {
  const std::string why = strFormat(
      "%s: %s is not permitted while stream %p captures a model (aclmdlRICaptureBegin): the "
      "host cannot wait for captured work, which runs only when the model is replayed; the "
      "capture is invalidated",
      api, what, static_cast<void*>(model->origin()));
  model->invalidate(why);
  return fail(code, "%s", why.c_str());
}

} // namespace npu_sim
