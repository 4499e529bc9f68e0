// The queue between a stream's producers and its consumer.
//
// Every device op enqueues one item, so the host side of this queue is the
// hottest path of the simulator, and what costs there is not instructions
// but cache lines moving between cores. With a mutex-protected vector that
// the worker swapped out, each enqueue took three locked instructions on
// lines the worker had just touched (the mutex twice, the counter once):
// 0.4-0.7 us per item while the worker kept up, against 0.04 us with the
// worker busy elsewhere. Here a producer touches only:
//
// - the producer lock, which only producers use (a spin lock released by a
//   plain store: no fence on the way out);
// - the slot it writes, in a segment of kSegmentItems slots;
// - the published count, written with a release store (a plain store on
//   x86-64), which the consumer polls.
//
// The queue is a list of segments, so it never fills up and a producer
// never waits for the consumer (device work may enqueue on its own stream).
// The consumer hands each finished segment back for the producers' next one.
//
// Consumers take items in order and one at a time: the caller serialises
// them (Stream's consumer mutex: the worker, or a synchronizer running
// leading copies itself).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "util.h"
#include "work_item.h"

namespace npu_sim {

class WorkQueue {
 public:
  WorkQueue();
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Producers, any thread: appends `item`; returns how many items were
  // published with it (its 1-based number).
  uint64_t push(const WorkItem& item);

  // Items published so far, any thread. Loads are seq_cst because the
  // worker's sleep handshake (Stream) pairs this load with a fence; on
  // x86-64 that is a plain load all the same.
  uint64_t published() const {
    return published_.load(std::memory_order_seq_cst);
  }

  // Consumer (serialised by the caller): item number `position` (0-based),
  // which must be published and be the first not yet consumed, or that one
  // again. Valid until the consumer asks for a later item.
  WorkItem& at(uint64_t position);

 private:
  static constexpr size_t kSegmentItems = 256;
  struct Segment {
    WorkItem items[kSegmentItems];
    std::atomic<Segment*> next{nullptr};
  };

  Segment* takeSegment();
  void recycleSegment(Segment* segment);

  // ---- producers (behind the producer lock) ----
  alignas(kCacheLine) std::atomic<bool> producer_locked_{false};
  Segment* tail_;           // segment holding the next item pushed
  uint64_t pushed_ = 0;     // items pushed (= published_, producers' copy)

  // ---- producers -> consumer ----
  alignas(kCacheLine) std::atomic<uint64_t> published_{0};
  // One finished segment kept for the producers' next one.
  std::atomic<Segment*> spare_{nullptr};

  // ---- consumer ----
  alignas(kCacheLine) Segment* head_; // segment holding item head_base_
  uint64_t head_base_ = 0;
};

} // namespace npu_sim
