#include "event.h"

#include <algorithm>
#include <chrono>

#include "ipc_event.h"
#include "runtime.h"
#include "stream.h"
#include "util.h"

namespace npu_sim {

Event* Event::create(uint32_t flags) {
  return new Event(flags);
}

Event* Event::opened(IpcEventState* state) {
  auto* event = new Event(ACL_EVENT_IPC);
  event->ipc_ = state;
  event->opened_ = true;
  return event;
}

Event::~Event() {
  delete ipc_;
}

aclError Event::exportState(std::string* handle) {
  std::lock_guard lock(mutex_);
  if (ipc_ == nullptr) {
    if (aclError err = IpcEventState::create(&ipc_, &ipc_handle_); err != ACL_SUCCESS) {
      return err;
    }
    publishLocked();
  }
  *handle = ipc_handle_;
  return ACL_SUCCESS;
}

void Event::publishLocked() {
  if (ipc_ == nullptr || opened_) {
    return;
  }
  const uint64_t first_pending =
      pending_.empty() ? latest_ + 1 : *std::min_element(pending_.begin(), pending_.end());
  ipc_->publish(latest_, first_pending);
}

Event* Event::fromHandle(aclrtEvent handle) {
  auto* event = static_cast<Event*>(handle);
  if (event == nullptr || event->magic_.load(std::memory_order_relaxed) != kMagic) {
    return nullptr;
  }
  return event;
}

void Event::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete this;
  }
}

void Event::destroy() {
  magic_.store(0, std::memory_order_relaxed);
  {
    std::lock_guard lock(mutex_);
    dropRecorderLocked();
  }
  release();
}

void Event::dropRecorderLocked() {
  if (recorder_ != nullptr) {
    recorder_->release();
    recorder_ = nullptr;
  }
}

void Event::noteRecorder(uint64_t generation, Stream* stream, uint64_t item) {
  std::lock_guard lock(mutex_);
  if (generation != latest_ || completeLocked(generation)) {
    return; // already reached, or recorded again since
  }
  dropRecorderLocked();
  stream->retain();
  recorder_ = stream;
  recorder_generation_ = generation;
  recorder_item_ = item;
}

std::pair<Stream*, uint64_t> Event::recorder(uint64_t generation) {
  std::lock_guard lock(mutex_);
  if (recorder_ == nullptr || recorder_generation_ != generation) {
    return {nullptr, 0};
  }
  recorder_->retain();
  return {recorder_, recorder_item_};
}

uint64_t Event::beginRecord() {
  std::lock_guard lock(mutex_);
  const uint64_t generation = ++latest_;
  pending_.push_back(generation);
  pending_count_.store(static_cast<uint32_t>(pending_.size()), std::memory_order_release);
  publishLocked();
  return generation;
}

void Event::completeRecord(uint64_t generation, std::shared_ptr<WorkError> error) {
  const int64_t now = nowNs();
  std::lock_guard lock(mutex_);
  auto it = std::find(pending_.begin(), pending_.end(), generation);
  if (it != pending_.end()) {
    pending_.erase(it);
  }
  if (generation > completed_max_) {
    completed_max_ = generation;
    timestamp_ns_ = now;
    error_ = std::move(error);
  }
  if (recorder_ != nullptr && recorder_generation_ == generation) {
    dropRecorderLocked();
  }
  // Release: a waiter that sees the new count also sees the work that ran
  // before this marker.
  pending_count_.store(static_cast<uint32_t>(pending_.size()), std::memory_order_release);
  publishLocked();
  if (waiters_ > 0) {
    cv_.notify_all();
  }
}

bool Event::completeLocked(uint64_t generation) const {
  return generation == 0 ||
      std::find(pending_.begin(), pending_.end(), generation) == pending_.end();
}

uint64_t Event::latest() {
  if (opened_) {
    return ipc_->latest();
  }
  std::lock_guard lock(mutex_);
  return latest_;
}

bool Event::isComplete(uint64_t generation) {
  if (opened_) {
    return ipc_->isComplete(generation);
  }
  if (pending_count_.load(std::memory_order_acquire) == 0) {
    return true;
  }
  std::lock_guard lock(mutex_);
  return completeLocked(generation);
}

bool Event::wait(uint64_t generation) {
  if (opened_) {
    return ipc_->wait(generation);
  }
  // Spin while the pending set changes now and then; check it under the
  // lock only when it did.
  const int64_t deadline = nowNs() + kWaiterSpin.count();
  while (true) {
    const uint32_t seen = pending_count_.load(std::memory_order_acquire);
    if (seen == 0 || isComplete(generation)) {
      return true;
    }
    const int64_t left = deadline - nowNs();
    if (left <= 0 ||
        !spinUntil([&] { return pending_count_.load(std::memory_order_acquire) != seen; },
                   std::chrono::nanoseconds(left))) {
      break;
    }
  }
  // Sleep. completeRecord notifies under the same lock, so no wake-up is
  // lost; the timeout only serves to notice process exit.
  std::unique_lock lock(mutex_);
  ++waiters_;
  while (!completeLocked(generation)) {
    if (processExiting()) {
      --waiters_;
      return false;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  --waiters_;
  return true;
}

std::shared_ptr<WorkError> Event::errorOf(uint64_t generation) {
  std::lock_guard lock(mutex_);
  return completed_max_ == generation ? error_ : nullptr;
}

Event::State Event::state() {
  if (opened_) {
    const uint64_t latest = ipc_->latest();
    return State{latest, ipc_->isComplete(latest), 0, nullptr};
  }
  std::lock_guard lock(mutex_);
  State s;
  s.latest = latest_;
  s.complete = completeLocked(latest_);
  s.timestamp_ns = s.complete ? timestamp_ns_ : 0;
  s.error = s.complete ? error_ : nullptr;
  return s;
}

} // namespace npu_sim
