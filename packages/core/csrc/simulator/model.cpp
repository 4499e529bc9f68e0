#include "model.h"

#include <algorithm>
#include <type_traits>
#include <unordered_set>

#include "errors.h"
#include "event.h"
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
        item);
  }
  origin_->release();
}

Model* Model::fromHandle(aclmdlRI handle) {
  auto* model = static_cast<Model*>(handle);
  std::lock_guard lock(g_models_mutex);
  return g_models.count(model) != 0 ? model : nullptr;
}

void Model::append(const WorkItem& item) {
  std::lock_guard lock(mutex_);
  std::visit(
      [this](const auto& w) {
        using W = std::decay_t<decltype(w)>;
        if constexpr (std::is_same_v<W, CopyWork> || std::is_same_v<W, MemsetWork> ||
                      std::is_same_v<W, UserWork>) {
          items_.emplace_back(w);
        }
        // Records and waits come through appendRecord and appendWait.
      },
      item);
}

void Model::appendRecord(Event* event) {
  std::lock_guard lock(mutex_);
  event->retain(); // released with the model
  const size_t slot = slots_++;
  last_record_slot_[event] = slot;
  items_.emplace_back(CapturedRecord{event, slot});
  event->setCapturedBy(this);
}

aclError Model::appendWait(Event* event, const char* api) {
  std::lock_guard lock(mutex_);
  auto it = last_record_slot_.find(event);
  if (it != last_record_slot_.end() && event->capturedBy() == this) {
    event->retain();
    items_.emplace_back(CapturedWait{event, it->second});
    return ACL_SUCCESS;
  }
  const uint64_t generation = event->latest();
  if (generation == 0 || event->isComplete(generation)) {
    return ACL_SUCCESS; // nothing to wait for, at capture or at any replay
  }
  invalidated_because_ = std::string(api) +
      ": the capturing stream waits for an event recorded outside the capture (a dependency "
      "on work that replays would not repeat; the simulator does not capture across streams yet)";
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

void Model::endCapture() {
  std::lock_guard lock(mutex_);
  for (auto& [event, slot] : last_record_slot_) {
    if (event->capturedBy() == this) {
      event->setCapturedBy(nullptr);
    }
  }
}

aclError Model::execute(Stream* stream) {
  std::lock_guard lock(mutex_);
  if (aclError err = stream->ensureWorker(); err != ACL_SUCCESS) {
    return err;
  }
  // This replay's generation of each captured record.
  std::vector<uint64_t> generations(slots_, 0);
  uint64_t last = 0;
  for (Item& item : items_) {
    std::visit(
        [&](auto& w) {
          using W = std::decay_t<decltype(w)>;
          if constexpr (std::is_same_v<W, CopyWork> || std::is_same_v<W, MemsetWork>) {
            last = stream->enqueue(w);
          } else if constexpr (std::is_same_v<W, UserWork>) {
            // The model keeps the work: no release after this run, and no
            // launcher waits for it.
            npuSimWork work = w.work;
            work.release = nullptr;
            work.flags &= ~NPU_SIM_WORK_AWAITED;
            last = stream->enqueue(UserWork{work, nextWorkId()});
          } else if constexpr (std::is_same_v<W, CapturedRecord>) {
            const uint64_t generation = w.event->beginRecord();
            w.event->retain(); // dropped by the worker after the record
            last = stream->enqueue(RecordWork{w.event, generation});
            w.event->noteRecorder(generation, stream, last);
            generations[w.slot] = generation;
          } else if constexpr (std::is_same_v<W, CapturedWait>) {
            w.event->retain(); // dropped by the worker after the wait
            last = stream->enqueue(WaitWork{w.event, generations[w.slot]});
          }
        },
        item);
  }
  if (last != 0) {
    stream->retain();
    replays_.emplace_back(stream, last);
  }
  return ACL_SUCCESS;
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
