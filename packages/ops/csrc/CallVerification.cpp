#include "CallVerification.h"

#include <atomic>
#include <mutex>
#include <unordered_set>
#include <utility>
#include <vector>

#include "npu/NPUFunctions.h"
#include "npu/NPUGraphsUtils.h"

namespace torch_npu_ops {
namespace {

// Signatures that ran cleanly: a process-wide set behind a per-thread copy,
// so that the common case (a signature seen before on this thread) is one
// lookup without a lock. Bounded: a program that keeps making new
// signatures starts over (it only costs another verified launch each).
constexpr size_t kMaxSignatures = 1 << 16;

std::mutex g_mutex;
std::unordered_set<uint64_t> g_verified;
std::atomic<uint64_t> g_generation{0}; // bumped when g_verified is cleared

struct ThreadCache {
  uint64_t generation = 0;
  std::unordered_set<uint64_t> verified;
};
thread_local ThreadCache t_cache;

bool is_verified(uint64_t signature) {
  const uint64_t generation = g_generation.load(std::memory_order_acquire);
  if (t_cache.generation != generation) {
    t_cache.verified.clear();
    t_cache.generation = generation;
  }
  if (t_cache.verified.count(signature) > 0) {
    return true;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_verified.count(signature) == 0) {
    return false;
  }
  t_cache.verified.insert(signature);
  return true;
}

// Note [Warnings of queued work]: warnings of queued kernels, with their
// signatures, until the host re-issues them.
constexpr size_t kMaxDeferredWarnings = 256;

std::mutex g_deferred_mutex;
std::vector<std::pair<uint64_t, c10::Warning>> g_deferred;
std::atomic<bool> g_any_deferred{false};

} // namespace

void DeferWarnings::process(const c10::Warning& warning) {
  {
    std::lock_guard<std::mutex> lock(g_deferred_mutex);
    if (g_deferred.size() < kMaxDeferredWarnings) {
      g_deferred.emplace_back(signature_, warning);
      g_any_deferred.store(true, std::memory_order_release);
      return;
    }
  }
  previous_->process(warning); // too many pending: to stderr, as before
}

void reissue_deferred_warnings() {
  if (C10_LIKELY(!g_any_deferred.load(std::memory_order_acquire))) {
    return;
  }
  std::vector<std::pair<uint64_t, c10::Warning>> deferred;
  {
    std::lock_guard<std::mutex> lock(g_deferred_mutex);
    deferred.swap(g_deferred);
    g_any_deferred.store(false, std::memory_order_relaxed);
  }
  {
    // Their signatures are verified again: their next calls warn at the
    // call (if they still warn).
    std::lock_guard<std::mutex> lock(g_mutex);
    for (const auto& entry : deferred) {
      g_verified.erase(entry.first);
    }
    g_generation.fetch_add(1, std::memory_order_acq_rel); // every thread's copy
  }
  for (const auto& entry : deferred) {
    c10::warn(entry.second); // on the host: Python's warnings
  }
}

std::shared_ptr<CallVerification> verification_for(uint64_t signature) {
  reissue_deferred_warnings();
  if (!c10_npu::launch_blocking() && is_verified(signature)) {
    return nullptr;
  }
  // Note [Stream capture] (core's NPUGraphsUtils.h): the host cannot wait
  // for captured work. The signature is verified at its next call outside
  // a capture.
  if (C10_UNLIKELY(c10_npu::current_stream_capture_status() != c10_npu::CaptureStatus::None)) {
    return nullptr;
  }
  return std::make_shared<CallVerification>();
}

void mark_verified(uint64_t signature) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_verified.size() >= kMaxSignatures) {
    g_verified.clear();
    g_generation.fetch_add(1, std::memory_order_acq_rel);
  }
  g_verified.insert(signature);
  if (t_cache.generation == g_generation.load(std::memory_order_relaxed)) {
    t_cache.verified.insert(signature);
  }
}

} // namespace torch_npu_ops
