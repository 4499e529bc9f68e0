#include "work_queue.h"

#include <sched.h>

namespace npu_sim {

WorkQueue::WorkQueue() : tail_(new Segment), head_(tail_) {}

WorkQueue::~WorkQueue() {
  // Unconsumed items (abandoned at process exit) are plain data: nothing to
  // release but the segments.
  for (Segment* s = head_; s != nullptr;) {
    Segment* next = s->next.load(std::memory_order_relaxed);
    delete s;
    s = next;
  }
  delete spare_.load(std::memory_order_relaxed);
}

WorkQueue::Segment* WorkQueue::takeSegment() {
  if (Segment* s = spare_.exchange(nullptr, std::memory_order_acquire)) {
    s->next.store(nullptr, std::memory_order_relaxed);
    return s;
  }
  return new Segment;
}

void WorkQueue::recycleSegment(Segment* segment) {
  // Keep one; a deep queue drained leaves the rest to the heap.
  delete spare_.exchange(segment, std::memory_order_acq_rel);
}

uint64_t WorkQueue::push(const WorkItem& item) {
  // Producers are rarely concurrent (several host threads on one stream),
  // and hold the lock for a few stores: spin, then yield to a holder that
  // was preempted.
  for (unsigned spins = 0; producer_locked_.exchange(true, std::memory_order_acquire);) {
    while (producer_locked_.load(std::memory_order_relaxed)) {
      if (++spins < 64) {
        cpuRelax();
      } else {
        sched_yield();
      }
    }
  }
  const size_t slot = pushed_ % kSegmentItems;
  if (slot == 0 && pushed_ != 0) {
    // Linked before the item is published: a consumer that sees the item
    // sees the segment.
    Segment* next = takeSegment();
    tail_->next.store(next, std::memory_order_release);
    tail_ = next;
  }
  tail_->items[slot] = item;
  const uint64_t number = ++pushed_;
  published_.store(number, std::memory_order_release);
  producer_locked_.store(false, std::memory_order_release);
  return number;
}

WorkItem& WorkQueue::at(uint64_t position) {
  if (position - head_base_ == kSegmentItems) {
    // The previous segment is consumed; the producer linked the next one
    // before publishing `position`.
    Segment* next = head_->next.load(std::memory_order_acquire);
    recycleSegment(head_);
    head_ = next;
    head_base_ = position;
  }
  return head_->items[position - head_base_];
}

} // namespace npu_sim
