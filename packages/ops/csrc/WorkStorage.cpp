#include "WorkStorage.h"

#include <atomic>
#include <cstdint>
#include <new>

namespace torch_npu_ops {
namespace {

struct FreeBlock {
  FreeBlock* next;
};

// Blocks returned by any thread, taken back whole by an allocating thread
// (an exchange, so no ABA problem).
std::atomic<FreeBlock*> g_returned{nullptr};
// Blocks in existence. Above the cap (a deep queue of tiny ops drained once),
// returned blocks go back to malloc so that the pool does not keep a peak.
std::atomic<int64_t> g_blocks{0};
constexpr int64_t kMaxBlocks = 4096;

void push_returned(FreeBlock* first, FreeBlock* last) noexcept {
  last->next = g_returned.load(std::memory_order_relaxed);
  while (!g_returned.compare_exchange_weak(
      last->next, first, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

// The allocating thread's private list; handed back when the thread exits.
struct ThreadBlocks {
  FreeBlock* head = nullptr;
  ~ThreadBlocks() {
    if (head == nullptr) {
      return;
    }
    FreeBlock* last = head;
    while (last->next != nullptr) {
      last = last->next;
    }
    push_returned(head, last);
  }
};
thread_local ThreadBlocks tls_blocks;

} // namespace

void* allocate_work_storage(size_t size) {
  if (size > kWorkBlockSize) {
    return ::operator new(size);
  }
  FreeBlock* block = tls_blocks.head;
  if (block == nullptr) {
    block = g_returned.exchange(nullptr, std::memory_order_acquire);
    if (block == nullptr) {
      g_blocks.fetch_add(1, std::memory_order_relaxed);
      return ::operator new(kWorkBlockSize);
    }
  }
  tls_blocks.head = block->next;
  return block;
}

void release_work_storage(void* storage, size_t size) noexcept {
  if (size > kWorkBlockSize) {
    ::operator delete(storage);
    return;
  }
  if (g_blocks.load(std::memory_order_relaxed) > kMaxBlocks) {
    g_blocks.fetch_sub(1, std::memory_order_relaxed);
    ::operator delete(storage);
    return;
  }
  auto* block = static_cast<FreeBlock*>(storage);
  push_returned(block, block);
}

} // namespace torch_npu_ops
