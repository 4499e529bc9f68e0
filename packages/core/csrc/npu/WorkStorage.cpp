#include "npu/WorkStorage.h"

#include <atomic>
#include <cstdint>
#include <new>

namespace c10_npu {
namespace {

// Blocks go back from the worker to the host in batches of kReturnBatch.
// The first block of a batch holds the addresses of the others, so the host
// reads one or two lines the worker wrote per batch; a linked list through
// the blocks would cost it a cache miss on every block it takes.
constexpr int kReturnBatch = 16;
struct ReturnedBatch {
  ReturnedBatch* next; // in the shared list
  int count;
  void* blocks[kReturnBatch - 1];
};
static_assert(sizeof(ReturnedBatch) <= kWorkBlockSize);

// Batches given back by any thread, taken whole by an allocating thread (an
// exchange, so no ABA problem).
std::atomic<ReturnedBatch*> g_returned{nullptr};
// Blocks in existence. Above the cap (a deep queue of tiny ops drained once),
// returned blocks go back to malloc so that the pool does not keep a peak.
std::atomic<int64_t> g_blocks{0};
constexpr int64_t kMaxBlocks = 4096;

void push_returned(ReturnedBatch* batch) noexcept {
  batch->next = g_returned.load(std::memory_order_relaxed);
  while (!g_returned.compare_exchange_weak(
      batch->next, batch, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

void free_block(void* block) noexcept {
  g_blocks.fetch_sub(1, std::memory_order_relaxed);
  ::operator delete(block);
}

struct ThreadBlocks {
  // An allocating thread (the host): blocks ready to hand out, and batches
  // taken from the shared list but not yet unpacked.
  void* ready[kReturnBatch];
  int ready_count = 0;
  ReturnedBatch* taken = nullptr;
  bool allocates = false;
  // A releasing thread (a stream's worker): the batch being filled.
  ReturnedBatch* filling = nullptr;

  ~ThreadBlocks() {
    if (filling != nullptr) {
      push_returned(filling);
    }
    for (int i = 0; i < ready_count; ++i) {
      free_block(ready[i]);
    }
    while (taken != nullptr) {
      ReturnedBatch* batch = taken;
      taken = batch->next;
      for (int i = 0; i < batch->count; ++i) {
        free_block(batch->blocks[i]);
      }
      free_block(batch);
    }
  }
};
thread_local ThreadBlocks tls_blocks;

} // namespace

void* allocate_work_storage(size_t size) {
  if (size > kWorkBlockSize) {
    return ::operator new(size);
  }
  ThreadBlocks& mine = tls_blocks;
  mine.allocates = true;
  if (mine.ready_count != 0) {
    return mine.ready[--mine.ready_count];
  }
  if (mine.taken == nullptr) {
    mine.taken = g_returned.exchange(nullptr, std::memory_order_acquire);
  }
  if (ReturnedBatch* batch = mine.taken) {
    // Unpack: the batch's own block is handed out now, the others later.
    mine.taken = batch->next;
    for (int i = 0; i < batch->count; ++i) {
      mine.ready[i] = batch->blocks[i];
    }
    mine.ready_count = batch->count;
    return batch;
  }
  g_blocks.fetch_add(1, std::memory_order_relaxed);
  return ::operator new(kWorkBlockSize);
}

void release_work_storage(void* storage, size_t size) noexcept {
  if (size > kWorkBlockSize) {
    ::operator delete(storage);
    return;
  }
  if (g_blocks.load(std::memory_order_relaxed) > kMaxBlocks) {
    free_block(storage);
    return;
  }
  ThreadBlocks& mine = tls_blocks;
  if (mine.allocates) {
    // Work released on the thread that made it (a failed launch): keep
    // the block for this thread's next allocation.
    if (mine.ready_count < kReturnBatch) {
      mine.ready[mine.ready_count++] = storage;
    } else {
      free_block(storage);
    }
    return;
  }
  if (mine.filling == nullptr) {
    mine.filling = new (storage) ReturnedBatch; // the addresses are written as they come
    mine.filling->count = 0;
    return;
  }
  ReturnedBatch* batch = mine.filling;
  batch->blocks[batch->count++] = storage;
  if (batch->count == kReturnBatch - 1) {
    push_returned(batch);
    mine.filling = nullptr;
  }
}

} // namespace c10_npu
