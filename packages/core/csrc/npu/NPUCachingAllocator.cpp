#include "npu/NPUCachingAllocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/util/ApproximateClock.h>
#include <c10/util/flat_hash_map.h>

#include "npu/NPUAllocatorConfig.h"
#include "npu/NPUEvent.h"
#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/impl/AclInterface.h"

namespace c10_npu::NPUCachingAllocator {
namespace {

using c10::CachingAllocator::format_size;
using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;

// Sizes as in CUDA's allocator, which Ascend's allocator also follows.
constexpr size_t kMinBlockSize = 512;      // every block is a multiple of this
constexpr size_t kSmallSize = 1048576;     // largest "small" request: 1 MiB
constexpr size_t kSmallBuffer = 2097152;   // segment for small requests: 2 MiB
constexpr size_t kLargeBuffer = 20971520;  // segment for 1-10 MiB requests
constexpr size_t kMinLargeAlloc = 10485760; // above: segment sized to request
constexpr size_t kRoundLarge = 2097152;    // large segments round to 2 MiB

struct Block;
struct BlockPool;
struct PrivatePool;

// Note [Expandable segments] (NPUCachingAllocator.h): one reserved virtual
// range of a (stream, size class) of the default pool. [base, base + mapped)
// is backed by physical chunks of `chunk` bytes, one handle each, in
// address order; the blocks of the segment tile exactly that range.
struct ExpandableSegment {
  void* base = nullptr;
  size_t reserved = 0; // bytes of virtual address space
  size_t chunk = 0;    // granule of mapping
  // The length of the prefix the blocks tile: every chunk of it is mapped
  // except the holes (Note [Holes in expandable segments]).
  size_t mapped = 0;
  // One per chunk of the prefix, in address order; null for a hole.
  std::vector<aclrtDrvMemHandle> handles;
  size_t holes = 0; // null entries of `handles`
  // The block that ends at base + mapped; null while nothing is mapped.
  Block* last = nullptr;

  char* end() const { return static_cast<char*>(base) + mapped; }
  char* chunk_at(size_t index) const { return static_cast<char*>(base) + index * chunk; }
  // The chunks [first, last) that [ptr, ptr + size) touches.
  std::pair<size_t, size_t> chunks_touched(const void* ptr, size_t size) const {
    const size_t offset = static_cast<size_t>(static_cast<const char*>(ptr) - static_cast<char*>(base));
    return {offset / chunk, (offset + size + chunk - 1) / chunk};
  }
  bool chunk_mapped(size_t index) const { return index < handles.size() && handles[index] != nullptr; }
  // Maximal runs of mapped chunks: what statistics and snapshots count as
  // segments (Note [Holes in expandable segments]).
  int64_t mapped_runs() const {
    int64_t runs = 0;
    for (size_t i = 0; i < handles.size(); ++i) {
      runs += handles[i] != nullptr && (i == 0 || handles[i - 1] == nullptr) ? 1 : 0;
    }
    return runs;
  }
  // The chunks [first, last) that lie wholly inside [ptr, ptr + size).
  std::pair<size_t, size_t> chunks_inside(const void* ptr, size_t size) const {
    const size_t offset = static_cast<size_t>(static_cast<const char*>(ptr) - static_cast<char*>(base));
    const size_t first = (offset + chunk - 1) / chunk;
    const size_t last = (offset + size) / chunk;
    return {first, std::max(first, last)};
  }
};

std::mutex g_oom_observers_mutex;
std::vector<OutOfMemoryObserver> g_oom_observers; // behind g_oom_observers_mutex

// Called without the allocator's lock: an observer may take a snapshot.
void notify_out_of_memory(c10::DeviceIndex device, size_t requested, size_t free, size_t total) {
  std::vector<OutOfMemoryObserver> observers;
  {
    std::lock_guard<std::mutex> lock(g_oom_observers_mutex);
    observers = g_oom_observers;
  }
  for (const auto& observer : observers) {
    observer(device, requested, free, total);
  }
}

// The granularity of the runtime's virtual memory on `device`, asked once;
// 0 when the runtime has none (CANN before 8.0.0, or the simulator
// emulating one), with a warning that expandable segments fall back to
// fixed-size segments.
size_t virtual_memory_granularity(c10::DeviceIndex device) {
  static const size_t granularity = [device] {
    const auto& api = acl::api();
    size_t g = 0;
    if (api.aclrtReserveMemAddress != nullptr && api.aclrtReleaseMemAddress != nullptr &&
        api.aclrtMallocPhysical != nullptr && api.aclrtFreePhysical != nullptr &&
        api.aclrtMapMem != nullptr && api.aclrtUnmapMem != nullptr &&
        api.aclrtMemGetAllocationGranularity != nullptr) {
      aclrtPhysicalMemProp prop{};
      prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
      prop.memAttr = ACL_HBM_MEM_HUGE;
      prop.location.id = static_cast<uint32_t>(device);
      prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
      if (api.aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, &g) !=
          ACL_SUCCESS) {
        api.aclGetRecentErrMsg(); // consumed: the answer is "no"
        g = 0;
      }
    }
    // Chunks of at least the small pool's segment size (2 MiB, the device's
    // huge page).
    return g == 0 ? 0 : std::max(g, kSmallBuffer);
  }();
  if (granularity == 0) {
    const auto& info = acl::backend_info();
    TORCH_WARN_ONCE(
        "expandable_segments:True needs CANN's virtual memory management (aclrtReserveMemAddress, "
        "aclrtMallocPhysical, aclrtMapMem), which CANN has since 8.0.0; the loaded runtime (",
        info.library, ", CANN ", info.cann_version, ") does not have it, so the NPU caching "
        "allocator uses fixed-size segments. Install CANN 8.0.0 or newer",
        acl::is_simulator() ? " (on the simulator: set NPU_SIM_CANN_VERSION=8.0.0 or newer)" : "",
        ".");
  }
  return granularity;
}

struct BlockComparator {
  bool operator()(const Block* a, const Block* b) const;
};

struct BlockPool {
  BlockPool(bool small, PrivatePool* owner) : is_small(small), owner(owner) {}
  std::set<Block*, BlockComparator> blocks;
  const bool is_small;
  PrivatePool* const owner; // null for the default and device-work pools
  // Note [Expandable segments]: by stream, only in the default pool. A null
  // entry: the range could not be reserved, the stream uses fixed segments.
  std::map<aclrtStream, std::unique_ptr<ExpandableSegment>> expandable;
};

// A pool as requests see it: small blocks (<= 1 MiB) and large ones. Blocks
// are keyed by (stream, pool): a block is only reused by a request of the
// stream it was allocated on, from the pool it belongs to. See Note
// [Private pools] and Note [Device-work memory] (NPUCachingAllocator.h).
struct PoolPair {
  explicit PoolPair(PrivatePool* owner = nullptr) : large(false, owner), small(true, owner) {}
  BlockPool large;
  BlockPool small;

  BlockPool& for_size(size_t size);
  bool holds(const Block& block) const;
};

// The pool of a capture or a MemPool (Note [Private pools]).
struct PrivatePool {
  PrivatePool() : blocks(this) {}
  PoolPair blocks;
  // Holders of the pool's id (captures, graphs, MemPools); its cached
  // memory goes back to the device once none is left.
  int use_count = 1;
  // Blocks of the pool in use (allocated, or freed but waiting for events).
  int64_t live_blocks = 0;
  // Non-zero while a graph capture allocates to the pool: the capture's
  // serial, given to the blocks it allocates (Block::capture_serial).
  uint64_t capture_serial = 0;
};

struct Block {
  Block(c10::DeviceIndex device, aclrtStream stream, size_t size, BlockPool* pool, void* ptr)
      : device(device), stream(stream), size(size), pool(pool), ptr(ptr) {}
  // A search key for BlockPool lookups.
  Block(aclrtStream stream, size_t size) : stream(stream), size(size) {}

  bool is_split() const { return prev != nullptr || next != nullptr; }

  c10::DeviceIndex device = -1;
  aclrtStream stream = nullptr; // the stream the block was allocated on
  size_t size = 0;              // block size in bytes
  size_t requested_size = 0;    // what the caller asked for
  BlockPool* pool = nullptr;
  void* ptr = nullptr;
  bool allocated = false;
  // Free, but parked unmerged in a FreeList instead of the pool: neither
  // the best-fit search nor a neighbour's merge may take it.
  bool in_free_list = false;
  Block* prev = nullptr; // neighbours inside the same segment
  Block* next = nullptr;
  // The expandable segment the block is part of; null in fixed segments.
  ExpandableSegment* expandable = nullptr;
  int event_count = 0; // outstanding events of other streams' uses
  std::vector<c10::Stream> stream_uses; // streams other than `stream`
  // The serial of the graph capture that allocated the block, while it was
  // underway (PrivatePool::capture_serial); 0 otherwise.
  uint64_t capture_serial = 0;
  // When the block (or a block merged into it) was last freed, on the
  // allocator's free clock: releasing the cache after draining the device
  // releases only blocks freed before the drain began.
  uint64_t freed_at = 0;
  // Memory history (recordHistory): where the block was allocated, and on
  // a segment's first block, where the segment was.
  std::shared_ptr<c10::GatheredContext> context_when_allocated;
  std::shared_ptr<c10::GatheredContext> context_when_segment_allocated;
};

bool PoolPair::holds(const Block& block) const {
  return block.pool == &large || block.pool == &small;
}

bool BlockComparator::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) {
    return reinterpret_cast<uintptr_t>(a->stream) < reinterpret_cast<uintptr_t>(b->stream);
  }
  if (a->size != b->size) {
    return a->size < b->size;
  }
  return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
}

BlockPool& PoolPair::for_size(size_t size) {
  return size <= 1048576 ? small : large; // kSmallSize
}

// `divisions` is roundup_power2_divisions for this size (Note [Allocator
// settings], NPUAllocatorConfig.h): 0 keeps 512-byte steps; D rounds up to
// a multiple of 1/D of the power of two at or below the size.
size_t round_size(size_t size, uint32_t divisions) {
  if (size < kMinBlockSize) {
    return kMinBlockSize;
  }
  // Below D * 512 bytes a step would be finer than 512 bytes.
  if (C10_UNLIKELY(divisions > 0) && size > kMinBlockSize * divisions) {
    const size_t floor = size_t{1} << (std::bit_width(size) - 1);
    const size_t step = floor / divisions; // a power of two of at least 512
    return (size + step - 1) & ~(step - 1);
  }
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

// `page_size` (page_size:1g) is the granule of large-pool segments; 0 for
// the default sizes. `large_segment` (large_segment_size_mb) is the segment
// of large-pool requests below kMinLargeAlloc.
size_t segment_size_for(size_t size, size_t page_size, size_t large_segment) {
  if (size <= kSmallSize) {
    return kSmallBuffer;
  }
  if (C10_UNLIKELY(page_size != 0)) {
    return page_size * ((size + page_size - 1) / page_size);
  }
  if (size < kMinLargeAlloc) {
    return std::max(large_segment, kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge));
  }
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

void update(StatArray& stats, const BlockPool& pool, int64_t amount) {
  const size_t pool_type = static_cast<size_t>(
      pool.is_small ? StatType::SMALL_POOL : StatType::LARGE_POOL);
  for (const size_t type : {static_cast<size_t>(StatType::AGGREGATE), pool_type}) {
    if (amount >= 0) {
      stats[type].increase(static_cast<size_t>(amount));
    } else {
      stats[type].decrease(static_cast<size_t>(-amount));
    }
  }
}

// Recently freed blocks of one (stream, block size), kept out of the pool and
// unmerged. A training step frees and allocates the same sizes over and
// over; serving those from here skips the best-fit search, the split on
// allocation and the merge on free (each a set update plus a Block new or
// delete), which make up most of a cached malloc+free pair.
//
// Parked blocks are free memory in every other respect (stats count them as
// inactive, splits as inactive splits). The parked blocks of a (stream,
// pool) go back to the pool, merging with their neighbours, before any
// request of that (stream, pool) searches the pool (a request the free
// list cannot serve), all of them before any segment is released (empty_cache,
// OOM retry) or an expandable segment grows, and those of a slot reused for
// another size. So a search sees exactly what eager merging
// would have left: parked blocks neither make a request fail nor move
// where a block is placed (which would fragment the segments). Code that
// walks segments (memory snapshots) flushes the lists first.
struct FreeList {
  static constexpr int kCapacity = 8;

  aclrtStream stream = nullptr;
  BlockPool* pool = nullptr;
  size_t size = 0; // 0: slot unused
  uint64_t last_use = 0;
  int count = 0;
  // LIFO: the block freed last is reused first (its lines may be in cache).
  std::array<Block*, kCapacity> blocks{};
};

// Slots are searched linearly: a handful of sizes are hot at any time, and
// comparing a few pairs of words is cheaper than any map.
constexpr size_t kFreeListSlots = 8;

// The caching allocator of one device. Thread-safe.
class DeviceCachingAllocator {
 public:
  explicit DeviceCachingAllocator(c10::DeviceIndex device) : device_(device) {
    apply_settings_locked(AllocatorConfig::settings());
  }

  // Note [Allocator settings] (NPUAllocatorConfig.h): copied into plain
  // members, so that no request parses or locks for them.
  void apply_settings(const AllocatorSettings& settings) {
    std::lock_guard<std::mutex> lock(mutex_);
    apply_settings_locked(settings);
  }

  // Returns the address of a block of at least `requested` bytes usable on
  // `stream`: from the private pool a capture on `stream` allocates to, else
  // from the default pool.
  void* malloc(size_t requested, aclrtStream stream) {
    // Gathered before the lock: a Python stack takes microseconds.
    std::shared_ptr<c10::GatheredContext> context = gather_context(RecordContext::STATE);
    std::unique_lock<std::mutex> lock(mutex_);
    return malloc_locked(requested, stream, pools_for(stream), lock, std::move(context));
  }

  // Note [Device-work memory].
  void* malloc_device_work(size_t requested) {
    std::unique_lock<std::mutex> lock(mutex_);
    return malloc_locked(requested, nullptr, device_work_blocks_, lock, nullptr);
  }

  // Note [Private pools]: from now on, allocations on the streams `filter`
  // accepts come from the pool `id` (created, or its use count raised).
  void begin_allocate_to_pool(c10::MempoolId_t id, std::function<bool(aclrtStream)> filter) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& capture : captures_underway_) {
      TORCH_CHECK(capture.first != id, "beginAllocateToPool: pool (", id.first, ", ", id.second,
                  ") is already being allocated to on npu:", static_cast<int>(device_));
    }
    create_or_incref_pool_locked(id);
    captures_underway_.emplace_back(id, std::move(filter));
    if (id.first == 0) { // a graph's pool, not a MemPool's (graph_pool_handle)
      private_pools_.at(id)->capture_serial = ++capture_serials_;
    }
  }

  // Whether `ptr` is a block that a graph capture still underway allocated.
  bool allocated_by_capture_underway(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (captures_underway_.empty()) {
      return false;
    }
    auto it = allocated_blocks_.find(const_cast<void*>(ptr));
    if (it == allocated_blocks_.end()) {
      return false;
    }
    const Block* block = it->second;
    const PrivatePool* owner = block->pool->owner;
    return block->capture_serial != 0 && owner != nullptr && owner->capture_serial == block->capture_serial;
  }

  // Creates pool `id` or adds a use of it (a MemPool object holds one).
  void create_or_incref_pool(c10::MempoolId_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    create_or_incref_pool_locked(id);
  }

  void end_allocate_to_pool(c10::MempoolId_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = captures_underway_.begin(); it != captures_underway_.end(); ++it) {
      if (it->first == id) {
        captures_underway_.erase(it);
        if (auto pool = private_pools_.find(id); pool != private_pools_.end()) {
          pool->second->capture_serial = 0;
        }
        if (captures_underway_.empty()) {
          for (Block* block : frees_deferred_until_no_capture_) {
            insert_events(block);
          }
          frees_deferred_until_no_capture_.clear();
        }
        return;
      }
    }
    TORCH_CHECK(false, "endAllocateToPool: no allocation to pool (", id.first, ", ", id.second,
                ") is underway on npu:", static_cast<int>(device_));
  }

  // Drops a use of pool `id`; the last one gives its cached memory back
  // (blocks still allocated from it go back when freed, at the next
  // empty_cache).
  void release_pool(c10::MempoolId_t id) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto it = private_pools_.find(id);
    TORCH_CHECK(it != private_pools_.end(), "releasePool: npu:", static_cast<int>(device_),
                " has no pool (", id.first, ", ", id.second, ")");
    TORCH_CHECK(it->second->use_count > 0, "releasePool: pool (", id.first, ", ", id.second,
                ") was released more often than it was used");
    if (--it->second->use_count == 0) {
      release_cached_blocks(lock);
    }
  }

  // Memory history (NPUCachingAllocator.h: recordHistory).
  void record_history(bool enabled, CreateContextFn recorder, size_t max_entries, RecordContext when) {
    std::lock_guard<std::mutex> lock(mutex_);
    record_context_ = enabled ? when : RecordContext::NEVER;
    context_recorder_.store(enabled ? recorder : nullptr, std::memory_order_relaxed);
    max_trace_entries_ = std::max<size_t>(max_entries, 1);
    if (!enabled) {
      trace_.clear();
      trace_next_ = 0;
    }
    record_history_ = enabled;
  }

  // The segments (with their blocks) of every pool, and the trace.
  void snapshot(std::vector<SegmentInfo>* segments, std::vector<TraceEntry>* entries) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Block*> heads;
    const auto consider = [&heads](Block* block) {
      if (block->prev == nullptr) {
        heads.push_back(block);
      }
    };
    std::vector<PoolPair*> pools = {&default_blocks_, &device_work_blocks_};
    std::vector<c10::MempoolId_t> pool_ids = {{0, 0}, {0, 0}};
    for (auto& [id, pool] : private_pools_) {
      pools.push_back(&pool->blocks);
      pool_ids.push_back(id);
    }
    for (PoolPair* pair : pools) {
      for (BlockPool* pool : {&pair->large, &pair->small}) {
        std::for_each(pool->blocks.begin(), pool->blocks.end(), consider);
      }
    }
    for (const auto& entry : allocated_blocks_) {
      consider(entry.second);
    }
    for (const FreeList& list : free_lists_) {
      std::for_each(list.blocks.begin(), list.blocks.begin() + list.count, consider);
    }
    for (const auto& pending : outstanding_events_) {
      consider(pending.second);
    }
    std::sort(heads.begin(), heads.end());
    heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
    std::sort(heads.begin(), heads.end(), [](const Block* a, const Block* b) { return a->ptr < b->ptr; });
    for (Block* head : heads) {
      const auto new_segment_info = [&](uintptr_t address) {
        SegmentInfo segment;
        segment.device = device_;
        segment.address = address;
        segment.stream = head->stream;
        segment.is_large = !head->pool->is_small;
        segment.is_expandable = head->expandable != nullptr;
        for (size_t i = 0; i < pools.size(); ++i) {
          if (pools[i]->holds(*head)) {
            segment.owner_private_pool_id = pool_ids[i];
          }
        }
        segment.context_when_allocated = head->context_when_segment_allocated;
        return segment;
      };
      std::optional<SegmentInfo> segment;
      const auto add_block = [&](const Block* block, uintptr_t address, size_t size) {
        if (!segment.has_value()) {
          segment = new_segment_info(address);
        }
        BlockInfo info;
        info.size = size;
        info.requested_size = block->allocated ? block->requested_size : 0;
        info.allocated = block->allocated;
        info.active = block->allocated || block->event_count > 0 || !block->stream_uses.empty();
        info.context_when_allocated = block->context_when_allocated;
        segment->total_size += size;
        segment->allocated_size += info.allocated ? size : 0;
        segment->active_size += info.active ? size : 0;
        segment->requested_size += info.requested_size;
        segment->blocks.push_back(std::move(info));
      };
      const auto end_segment = [&] {
        if (segment.has_value()) {
          segments->push_back(std::move(*segment));
          segment.reset();
        }
      };
      for (const Block* block = head; block != nullptr; block = block->next) {
        const auto address = reinterpret_cast<uintptr_t>(block->ptr);
        const ExpandableSegment* range = block->expandable;
        if (range == nullptr || range->holes == 0) {
          add_block(block, address, block->size);
          continue;
        }
        // Note [Holes in expandable segments]: as torch.cuda's snapshots,
        // a segment per run of mapped chunks, the free blocks cut at holes.
        const auto base = reinterpret_cast<uintptr_t>(range->base);
        uintptr_t from = address;
        const uintptr_t to = address + block->size;
        while (from < to) {
          const size_t index = (from - base) / range->chunk;
          const uintptr_t chunk_end = std::min<uintptr_t>(to, base + (index + 1) * range->chunk);
          if (!range->chunk_mapped(index)) {
            end_segment();
            from = chunk_end;
            continue;
          }
          uintptr_t run_end = chunk_end;
          for (size_t i = index + 1; run_end < to && range->chunk_mapped(i); ++i) {
            run_end = std::min<uintptr_t>(to, base + (i + 1) * range->chunk);
          }
          add_block(block, from, run_end - from);
          from = run_end;
        }
      }
      end_segment();
    }
    // The ring's oldest entry first.
    entries->insert(entries->end(), trace_.begin() + static_cast<std::ptrdiff_t>(trace_next_), trace_.end());
    entries->insert(entries->end(), trace_.begin(), trace_.begin() + static_cast<std::ptrdiff_t>(trace_next_));
  }

  // Ids of the private pools that exist (for tests and snapshots).
  std::vector<c10::MempoolId_t> private_pool_ids() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<c10::MempoolId_t> ids;
    for (const auto& entry : private_pools_) {
      ids.push_back(entry.first);
    }
    return ids;
  }

 private:
  // The caller's stack when history records at least `level` (else null);
  // may be called without the lock.
  std::shared_ptr<c10::GatheredContext> gather_context(RecordContext level) {
    const CreateContextFn recorder = context_recorder_.load(std::memory_order_relaxed);
    if (C10_LIKELY(recorder == nullptr) || record_context_ < level) {
      return nullptr;
    }
    return recorder();
  }

  // Appends to the history ring (mutex_ held).
  void trace(TraceEntry::Action action, void* ptr, size_t size, aclrtStream stream,
             std::shared_ptr<c10::GatheredContext> context) {
    TraceEntry entry{action, device_, reinterpret_cast<uintptr_t>(ptr), size, stream,
                     c10::getTime() / 1000, std::move(context)};
    if (action == TraceEntry::OOM) {
      entry.addr = memory_info().first; // as CUDA's: the device's free bytes
    }
    if (trace_.size() < max_trace_entries_) {
      trace_.push_back(std::move(entry));
      return;
    }
    trace_[trace_next_] = std::move(entry);
    trace_next_ = (trace_next_ + 1) % trace_.size();
  }

  void create_or_incref_pool_locked(c10::MempoolId_t id) {
    auto [it, created] = private_pools_.try_emplace(id);
    if (created) {
      it->second = std::make_unique<PrivatePool>();
    } else {
      ++it->second->use_count;
    }
  }

  // Where tensor memory for `stream` comes from (Note [Private pools]).
  PoolPair& pools_for(aclrtStream stream) {
    if (C10_UNLIKELY(!captures_underway_.empty())) {
      for (const auto& [id, filter] : captures_underway_) {
        if (filter(stream)) {
          return private_pools_.at(id)->blocks;
        }
      }
    }
    return default_blocks_;
  }

  void* malloc_locked(size_t requested, aclrtStream stream, PoolPair& pools,
                      std::unique_lock<std::mutex>& lock, std::shared_ptr<c10::GatheredContext> context) {
    if (C10_UNLIKELY(!outstanding_events_.empty()) && captures_underway_.empty()) {
      process_events(/*wait=*/false);
    }
    const size_t size = block_size_for(requested);
    BlockPool& target = pools.for_size(size);
    Block* block = take_from_free_list(stream, size, target);
    if (C10_UNLIKELY(block == nullptr)) {
      block = take_from_pool(stream, size, requested, target, lock, context);
    }
    block->capture_serial = 0;
    if (C10_UNLIKELY(target.owner != nullptr)) {
      ++target.owner->live_blocks;
      block->capture_serial = target.owner->capture_serial;
    }
    block->allocated = true;
    block->requested_size = requested;
    if (C10_UNLIKELY(block->size >= max_split_size_)) {
      stats_.oversize_allocations.increase(1);
    }
    BlockPool& pool = *block->pool;
    update(stats_.allocation, pool, 1);
    update(stats_.allocated_bytes, pool, static_cast<int64_t>(block->size));
    update(stats_.active, pool, 1);
    update(stats_.active_bytes, pool, static_cast<int64_t>(block->size));
    update(stats_.requested_bytes, pool, static_cast<int64_t>(requested));
    // Inserted under the same lock: no second lock per allocation.
    allocated_blocks_.emplace(block->ptr, block);
    report_to_profiler(block->ptr, static_cast<int64_t>(block->size));
    if (C10_UNLIKELY(record_history_)) {
      block->context_when_allocated = record_context_ >= RecordContext::ALLOC ? context : nullptr;
      trace(TraceEntry::ALLOC, block->ptr, block->size, stream, std::move(context));
    }
    return block->ptr;
  }

 public:
  // Frees `ptr` if this device allocated it; false otherwise.
  bool free(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocated_blocks_.find(ptr);
    if (it == allocated_blocks_.end()) {
      return false;
    }
    Block* block = it->second;
    allocated_blocks_.erase(it);
    free_block_locked(block);
    return true;
  }

  // Adds a use of `ptr`'s block on `stream`; false if this device did not
  // allocate `ptr`.
  bool record_stream(void* ptr, c10::Stream stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocated_blocks_.find(ptr);
    if (it == allocated_blocks_.end()) {
      return false;
    }
    Block* block = it->second;
    if (NPUStream(stream).stream() == block->stream) {
      return true;
    }
    if (std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) ==
        block->stream_uses.end()) {
      block->stream_uses.push_back(stream);
    }
    return true;
  }

  // Removes the use of `ptr`'s block on `stream` that record_stream added
  // (nothing if there is none); false if this device did not allocate `ptr`.
  bool erase_stream(void* ptr, c10::Stream stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocated_blocks_.find(ptr);
    if (it == allocated_blocks_.end()) {
      return false;
    }
    auto& uses = it->second->stream_uses;
    uses.erase(std::remove(uses.begin(), uses.end(), stream), uses.end());
    return true;
  }

  // Whether `ptr` is a live allocation of this device made on `stream`.
  bool allocated_on(void* ptr, aclrtStream stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocated_blocks_.find(ptr);
    return it != allocated_blocks_.end() && it->second->stream == stream;
  }

  // getBaseAllocation (NPUCachingAllocator.h); null if this device did not
  // allocate `ptr`.
  void* base_allocation(void* ptr, size_t* size) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocated_blocks_.find(ptr);
    if (it == allocated_blocks_.end()) {
      return nullptr;
    }
    const Block* block = it->second;
    if (block->expandable != nullptr) {
      *size = block->size;
      return block->ptr;
    }
    while (block->prev != nullptr) {
      block = block->prev;
    }
    size_t total = 0;
    for (const Block* b = block; b != nullptr; b = b->next) {
      total += b->size;
    }
    *size = total;
    return block->ptr;
  }

  // Gives the cached memory back to the device: of every pool not in use
  // by a capture, graph or MemPool (id {0, 0}), or of private pool `id`.
  void empty_cache(c10::MempoolId_t id = {0, 0}) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (id == c10::MempoolId_t{0, 0}) {
      release_cached_blocks(lock);
      return;
    }
    auto it = private_pools_.find(id);
    TORCH_CHECK(it != private_pools_.end(), "empty_cache: npu:", static_cast<int>(device_),
                " has no pool (", id.first, ", ", id.second, ")");
    release_cached_blocks(lock, &it->second->blocks);
  }

  DeviceStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_accumulated_stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (StatArray* array : all_stat_arrays()) {
      for (Stat& stat : *array) {
        stat.reset_accumulated();
      }
    }
    stats_.num_alloc_retries = 0;
    stats_.num_ooms = 0;
    stats_.num_sync_all_streams = 0;
    stats_.num_device_alloc = 0;
    stats_.num_device_free = 0;
    stats_.oversize_allocations.reset_accumulated();
    stats_.oversize_segments.reset_accumulated();
  }

  void reset_peak_stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (StatArray* array : all_stat_arrays()) {
      for (Stat& stat : *array) {
        stat.reset_peak();
      }
    }
    stats_.oversize_allocations.reset_peak();
    stats_.oversize_segments.reset_peak();
  }

  void set_memory_fraction(double fraction) {
    std::lock_guard<std::mutex> lock(mutex_);
    fraction_ = fraction;
    const size_t total = memory_info().second;
    allowed_maximum_ = static_cast<size_t>(fraction * static_cast<double>(total));
  }

  double memory_fraction() {
    std::lock_guard<std::mutex> lock(mutex_);
    return fraction_;
  }

  std::pair<size_t, size_t> memory_info() {
    ensure_device_context(device_);
    size_t free = 0;
    size_t total = 0;
    NPU_CHECK(acl::api().aclrtGetMemInfo(ACL_HBM_MEM, &free, &total));
    return {free, total};
  }

 private:
  std::array<StatArray*, 9> all_stat_arrays() {
    return {&stats_.allocation, &stats_.segment, &stats_.active,
            &stats_.inactive_split, &stats_.allocated_bytes,
            &stats_.reserved_bytes, &stats_.active_bytes,
            &stats_.inactive_split_bytes, &stats_.requested_bytes};
  }

  // Cached blocks that are split parts of a segment count as inactive splits.
  void pool_insert(Block* block) {
    block->pool->blocks.insert(block);
    if (block->is_split()) {
      update(stats_.inactive_split, *block->pool, 1);
      update(stats_.inactive_split_bytes, *block->pool, static_cast<int64_t>(block->size));
    }
  }

  void pool_erase(Block* block) {
    block->pool->blocks.erase(block);
    if (block->is_split()) {
      update(stats_.inactive_split, *block->pool, -1);
      update(stats_.inactive_split_bytes, *block->pool, -static_cast<int64_t>(block->size));
    }
  }

  // PyTorch's profiler (profile_memory=True) sees every allocation and
  // free with the totals after it, as from CUDA's allocator; a thread-local
  // lookup when no profiler runs. Called with mutex_ held.
  void report_to_profiler(void* ptr, int64_t delta) const {
    constexpr auto kAll = static_cast<size_t>(StatType::AGGREGATE);
    c10::reportMemoryUsageToProfiler(
        ptr, delta, static_cast<size_t>(stats_.allocated_bytes[kAll].current),
        static_cast<size_t>(stats_.reserved_bytes[kAll].current),
        c10::Device(c10::DeviceType::PrivateUse1, device_));
  }

  // Called with mutex_ held for a block whose allocation ended.
  void free_block_locked(Block* block) {
    block->allocated = false;
    block->freed_at = ++free_clock_;
    BlockPool& pool = *block->pool;
    if (C10_UNLIKELY(pool.owner != nullptr)) {
      --pool.owner->live_blocks;
    }
    update(stats_.allocation, pool, -1);
    update(stats_.allocated_bytes, pool, -static_cast<int64_t>(block->size));
    update(stats_.requested_bytes, pool, -static_cast<int64_t>(block->requested_size));
    if (C10_UNLIKELY(block->size >= max_split_size_)) {
      stats_.oversize_allocations.decrease(1);
    }
    report_to_profiler(block->ptr, -static_cast<int64_t>(block->size));
    if (C10_UNLIKELY(record_history_)) {
      // Memory other streams still use is free only once their events
      // complete (process_events then traces FREE_COMPLETED).
      trace(block->stream_uses.empty() ? TraceEntry::FREE_COMPLETED : TraceEntry::FREE_REQUESTED,
            block->ptr, block->size, block->stream,
            record_context_ == RecordContext::ALL ? gather_context(RecordContext::ALL) : nullptr);
      block->context_when_allocated = nullptr;
    }
    if (C10_UNLIKELY(!block->stream_uses.empty())) {
      // Other streams may still use the memory: cache it only once events
      // recorded on them now have completed. During a capture those streams
      // may capture too, where an event recorded now would complete only at
      // a replay and could not be queried: the events are recorded when the
      // last capture ends (Note [Frees during a capture]).
      if (C10_UNLIKELY(!captures_underway_.empty())) {
        frees_deferred_until_no_capture_.push_back(block);
        return;
      }
      insert_events(block);
      return;
    }
    if (C10_LIKELY(park_in_free_list(block))) {
      update(stats_.active, pool, -1);
      update(stats_.active_bytes, pool, -static_cast<int64_t>(block->size));
      return;
    }
    free_block(block);
  }

  // The fast path: a parked block of exactly `size` freed on `stream`.
  Block* take_from_free_list(aclrtStream stream, size_t size, BlockPool& pool) {
    FreeList* list = find_free_list(stream, size, &pool);
    if (list == nullptr || list->count == 0) {
      return nullptr;
    }
    Block* block = list->blocks[--list->count];
    list->last_use = ++free_list_clock_;
    block->in_free_list = false;
    count_inactive_split(block, -1);
    return block;
  }

  // The general path: best fit from the pool, else a new segment; splits
  // what the request does not need.
  Block* take_from_pool(aclrtStream stream, size_t size, size_t requested, BlockPool& pool,
                        std::unique_lock<std::mutex>& lock,
                        const std::shared_ptr<c10::GatheredContext>& context) {
    // The best fit is chosen among everything eager merging would have
    // left in the pool: a search that missed the parked blocks of its
    // (stream, pool) would place the block elsewhere and fragment the
    // segments (on the LLM trace of benchmarks/allocator_traces.py,
    // reserved / requested 1.85 -> 1.54).
    flush_free_lists(stream, pool);
    Block* block = take_cached_block(pool, stream, size);
    if (block == nullptr) {
      block = new_segment(pool, stream, size, requested, lock, context);
    }
    if (should_split(*block, size)) {
      block = carve_front(block, size);
    }
    if (C10_UNLIKELY(block->expandable != nullptr && block->expandable->holes > 0)) {
      fill_holes(*block, requested, lock, context);
    }
    return block;
  }

  // Splits `block` (out of the pool) into a block of `size` bytes at its
  // front, returned, and the rest, cached in the pool.
  Block* carve_front(Block* remaining, size_t size) {
    auto* block = new Block(device_, remaining->stream, size, remaining->pool, remaining->ptr);
    block->expandable = remaining->expandable;
    block->prev = remaining->prev;
    if (block->prev != nullptr) {
      block->prev->next = block;
    }
    block->next = remaining;
    remaining->prev = block;
    remaining->ptr = static_cast<char*>(remaining->ptr) + size;
    remaining->size -= size;
    pool_insert(remaining);
    return block;
  }

  FreeList* find_free_list(aclrtStream stream, size_t size, BlockPool* pool) {
    for (FreeList& list : free_lists_) {
      if (list.size == size && list.stream == stream && list.pool == pool) {
        return &list;
      }
    }
    return nullptr;
  }

  // Parks a free block (no pending stream uses) in its free list, taking an
  // unused or the least recently used slot; false when that list is full or
  // the block is larger than its request rounds to (an unsplit large block:
  // no request looks for its size, so parking it would only force flushes).
  bool park_in_free_list(Block* block) {
    if (block->size != block_size_for(block->requested_size)) {
      return false;
    }
    FreeList* list = find_free_list(block->stream, block->size, block->pool);
    if (C10_UNLIKELY(list == nullptr)) {
      list = &free_lists_[0];
      for (FreeList& candidate : free_lists_) {
        if (candidate.count == 0) {
          list = &candidate;
          break;
        }
        if (candidate.last_use < list->last_use) {
          list = &candidate;
        }
      }
      // `block` is in neither the pool nor a list yet: flagged, the
      // evicted blocks' merges leave it alone.
      block->in_free_list = true;
      flush_free_list(*list);
      block->in_free_list = false;
      list->stream = block->stream;
      list->pool = block->pool;
      list->size = block->size;
    }
    if (list->count == FreeList::kCapacity) {
      return false;
    }
    list->blocks[list->count++] = block;
    list->last_use = ++free_list_clock_;
    block->in_free_list = true;
    count_inactive_split(block, 1);
    return true;
  }

  // Returns the list's blocks to the pool, merging them with free
  // neighbours. The active stats were settled when the blocks were parked.
  void flush_free_list(FreeList& list) {
    while (list.count > 0) {
      Block* block = list.blocks[--list.count];
      block->in_free_list = false;
      count_inactive_split(block, -1);
      merge_into_pool(block);
    }
  }

  // Flushes every free list; true if any block went back to the pool.
  bool flush_free_lists() {
    bool flushed = false;
    for (FreeList& list : free_lists_) {
      flushed = flushed || list.count > 0;
      flush_free_list(list);
    }
    return flushed;
  }

  // Flushes the free lists of (stream, pool).
  void flush_free_lists(aclrtStream stream, const BlockPool& pool) {
    for (FreeList& list : free_lists_) {
      if (list.count > 0 && list.stream == stream && list.pool == &pool) {
        flush_free_list(list);
      }
    }
  }

  // A free split block counts as an inactive split wherever it is cached.
  void count_inactive_split(Block* block, int sign) {
    if (block->is_split()) {
      update(stats_.inactive_split, *block->pool, sign);
      update(stats_.inactive_split_bytes, *block->pool,
             sign * static_cast<int64_t>(block->size));
    }
  }

  Block* take_cached_block(BlockPool& pool, aclrtStream stream, size_t size) {
    Block key(stream, size);
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) {
      return nullptr;
    }
    // max_split_size (CUDA's rule): oversize blocks are never split, so a
    // smaller request must not take one, and a request of that size takes
    // one only if it wastes less than kLargeBuffer. The smallest fitting
    // block is the best any other block of the stream could do.
    const size_t found = (*it)->size;
    if (C10_UNLIKELY(found >= max_split_size_) &&
        (size < max_split_size_ || found >= size + kLargeBuffer)) {
      return nullptr;
    }
    Block* block = *it;
    if (C10_UNLIKELY(block->expandable != nullptr) && !pool.is_small && size < max_split_size_) {
      block = lowest_fitting_block(pool, it, size);
    }
    pool_erase(block);
    return block;
  }

  // Note [Placement in expandable segments]: in an expandable segment, free
  // address space costs nothing; what costs physical memory beyond the
  // blocks' own bytes is the partial chunk at each end of every run of
  // allocated blocks (a chunk shared by an allocated block and free memory
  // stays mapped; Note [Holes in expandable segments]). Best fit scatters
  // the blocks of a growing workload over the segment: each KV cache,
  // allocated a little longer than the one it replaces, goes to whichever
  // gap fits it best, and the live caches end up in many short runs. So a
  // large request takes the free block of the segment at the lowest address
  // that fits it (address-ordered first fit), from its front: allocated
  // blocks pack toward the segment's start and free memory gathers toward
  // its end, where the segment grows, so the live memory forms few runs and
  // the gaps between them are whole chunks that go back to the device.
  // Measured on benchmarks/allocator_traces.py, kv-cache-large (9 caches of
  // up to 16 MiB live at its peak): reserved / requested 1.083 with best fit
  // (carving the end of a free block that had fewer holes; the live caches
  // sat in 4-5 runs) -> 1.028, the other traces unchanged. The price: the
  // gap a request takes is often unmapped while the caches just freed, still
  // mapped, lie above it, so more chunks move per allocation (unmapped and
  // mapped again, Note [Reclaiming free chunks]). Small requests keep best
  // fit: a small block is a fraction of a chunk (its placement moves no
  // chunk boundary that matters) and the small pool's many free blocks keep
  // their search logarithmic. `best` is the best fit, the first candidate;
  // the scan covers the stream's free blocks of at least `size` bytes.
  Block* lowest_fitting_block(const BlockPool& pool, std::set<Block*, BlockComparator>::iterator best,
                              size_t size) const {
    Block* lowest = *best;
    for (auto it = best; it != pool.blocks.end() && (*it)->stream == lowest->stream; ++it) {
      const Block* candidate = *it;
      // Oversize blocks are never split (max_split_size), and a fixed
      // segment's block (the setting turned on at run time) keeps best fit.
      if (candidate->size >= max_split_size_ || candidate->expandable != lowest->expandable) {
        continue;
      }
      if (reinterpret_cast<uintptr_t>(candidate->ptr) < reinterpret_cast<uintptr_t>(lowest->ptr)) {
        lowest = *it;
      }
    }
    return lowest;
  }

  bool should_split(const Block& block, size_t size) const {
    const size_t remaining = block.size - size;
    // Requests of max_split_size or more leave their block whole.
    return block.pool->is_small ? remaining >= kMinBlockSize
                                : remaining > kSmallSize && size < max_split_size_;
  }

  Block* new_segment(BlockPool& pool, aclrtStream stream, size_t size, size_t requested,
                     std::unique_lock<std::mutex>& lock,
                     const std::shared_ptr<c10::GatheredContext>& context) {
    if (ExpandableSegment* segment = expandable_segment_for(pool, stream)) {
      if (Block* block = grow_expandable(*segment, pool, stream, size, requested, lock, context)) {
        return block;
      }
    }
    const size_t segment_size = segment_size_for(size, page_size_, large_segment_size_);
    // Not while a capture is underway: draining the device would end it.
    if (C10_UNLIKELY(gc_threshold_ > 0.0) && allowed_maximum_ != std::numeric_limits<size_t>::max() &&
        captures_underway_.empty()) {
      garbage_collect(is_device_work(pool), lock);
    }
    void* ptr = device_malloc(segment_size);
    if (ptr == nullptr) {
      // Give the cache back to the device and try once more. Device work
      // cannot drain the device it runs on: it gives back only device-work
      // memory, which no queued work uses once freed.
      ++stats_.num_alloc_retries;
      if (is_device_work(pool)) {
        flush_free_lists();
        release_segments(device_work_blocks_, [](const Block&) { return true; });
      } else {
        release_cached_blocks(lock);
      }
      ptr = device_malloc(segment_size);
    }
    if (ptr == nullptr) {
      ++stats_.num_ooms;
      if (C10_UNLIKELY(record_history_)) {
        trace(TraceEntry::OOM, nullptr, requested, stream, context);
      }
      raise_out_of_memory(requested, segment_size, is_device_work(pool), /*expandable=*/false, lock);
    }
    ++stats_.num_device_alloc;
    if (segment_size >= max_split_size_) {
      stats_.oversize_segments.increase(1);
    }
    update(stats_.segment, pool, 1);
    update(stats_.reserved_bytes, pool, static_cast<int64_t>(segment_size));
    auto* segment = new Block(device_, stream, segment_size, &pool, ptr);
    if (C10_UNLIKELY(record_history_)) {
      segment->context_when_segment_allocated = context;
      trace(TraceEntry::SEGMENT_ALLOC, ptr, segment_size, stream, context);
    }
    return segment;
  }

  bool is_device_work(const BlockPool& pool) const {
    return &pool == &device_work_blocks_.large || &pool == &device_work_blocks_.small;
  }

  size_t reserved() const {
    return static_cast<size_t>(
        stats_.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current);
  }

  // Device memory from the runtime; null when the device (or the process's
  // memory fraction) is out of memory.
  void* device_malloc(size_t size) {
    if (reserved() + size > allowed_maximum_) {
      return nullptr;
    }
    ensure_device_context(device_);
    void* ptr = nullptr;
    const aclError err = acl::api().aclrtMalloc(&ptr, size, ACL_MEM_MALLOC_HUGE_FIRST);
    if (err == ACL_ERROR_RT_MEMORY_ALLOCATION || err == ACL_ERROR_BAD_ALLOC ||
        err == ACL_ERROR_RT_DEVICE_OOM) {
      acl::api().aclGetRecentErrMsg(); // consumed: we report our own message
      return nullptr;
    }
    NPU_CHECK(err);
    return ptr;
  }

  // ---- Note [Expandable segments] ----

  // The expandable segment that new memory of `stream` grows in, reserved
  // on first use; null when expandable segments are off, the pool is not
  // the default one, the runtime has no virtual memory (warned once) or the
  // range could not be reserved: the caller then takes a fixed segment.
  ExpandableSegment* expandable_segment_for(BlockPool& pool, aclrtStream stream) {
    if (C10_LIKELY(!expandable_segments_) || pool.owner != nullptr || is_device_work(pool)) {
      return nullptr;
    }
    auto it = pool.expandable.find(stream);
    if (it != pool.expandable.end()) {
      return it->second.get();
    }
    ensure_device_context(device_);
    const size_t granularity = virtual_memory_granularity(device_);
    if (granularity == 0) {
      return nullptr;
    }
    auto segment = std::make_unique<ExpandableSegment>();
    // page_size:1g makes large-pool chunks 1 GiB (huge pages).
    segment->chunk = !pool.is_small && page_size_ > granularity ? page_size_ : granularity;
    // As much address space as the device has memory, so that the segment
    // can hold all of it.
    const size_t total = memory_info().second;
    segment->reserved = segment->chunk * ((total + segment->chunk - 1) / segment->chunk);
    const aclError err = acl::api().aclrtReserveMemAddress(&segment->base, segment->reserved, 0, nullptr, 0);
    if (err != ACL_SUCCESS) {
      const char* why = acl::api().aclGetRecentErrMsg();
      TORCH_WARN("expandable_segments: could not reserve ", format_size(segment->reserved),
                 " of virtual address space on npu:", static_cast<int>(device_), " (",
                 acl::error_name(err), why != nullptr ? std::string(": ") + why : std::string(),
                 "); this stream's ", pool.is_small ? "small" : "large",
                 " blocks use fixed-size segments instead.");
      pool.expandable.emplace(stream, nullptr);
      return nullptr;
    }
    return pool.expandable.emplace(stream, std::move(segment)).first->second.get();
  }

  // Maps more memory at the end of `segment` so that its last block (grown
  // if free, else a new block after it) has at least `size` bytes, and
  // returns that block, out of the pool. Null when the reserved range has
  // no room left (the caller takes a fixed segment); raises
  // torch.OutOfMemoryError when the device has no memory, after giving the
  // cache back once.
  Block* grow_expandable(ExpandableSegment& segment, BlockPool& pool, aclrtStream stream, size_t size,
                         size_t requested, std::unique_lock<std::mutex>& lock,
                         const std::shared_ptr<c10::GatheredContext>& context) {
    bool reclaimed = false;
    const SpareChunksRelease spares{*this, lock};
    for (int attempt = 0;; ++attempt) {
      // A parked last block would change its split state unseen.
      flush_free_lists();
      if (!reclaimed) {
        // Note [Holes in expandable segments]: free memory in the middle
        // gives its physical chunks back before the end maps new ones.
        reclaimed = true;
        if (unmap_free_middle_chunks(segment, pool, stream, lock)) {
          continue; // the lock was released: look again
        }
        reclaim_free_chunks(segment.last); // Note [Reclaiming free chunks]
      }
      Block* last = segment.last;
      const bool last_free = last != nullptr && !last->allocated && last->event_count == 0 &&
          last->stream_uses.empty();
      const size_t have = last_free ? last->size : 0;
      // segment_size_mb: large-pool segments grow by at least that much.
      const size_t least = pool.is_small ? 0 : expandable_growth_;
      const size_t grow = segment.chunk * ((std::max(size - have, least) + segment.chunk - 1) / segment.chunk);
      if (grow > segment.reserved - segment.mapped) {
        return nullptr;
      }
      char* const at = segment.end();
      const int64_t runs_before = segment.mapped_runs();
      if (map_chunks(segment, grow)) {
        update(stats_.segment, pool, segment.mapped_runs() - runs_before);
        update(stats_.reserved_bytes, pool, static_cast<int64_t>(grow));
        ++stats_.num_device_alloc;
        if (C10_UNLIKELY(record_history_)) {
          trace(TraceEntry::SEGMENT_MAP, at, grow, stream, context);
        }
        if (last_free) {
          pool_erase(last);
          last->size += grow;
          return last;
        }
        auto* block = new Block(device_, stream, grow, &pool, at);
        block->expandable = &segment;
        block->prev = last;
        if (last != nullptr) {
          last->next = block;
        } else if (C10_UNLIKELY(record_history_)) {
          block->context_when_segment_allocated = context;
        }
        segment.last = block;
        return block;
      }
      free_spare_chunks(); // before the lock is released
      if (attempt == 1) {
        ++stats_.num_ooms;
        if (C10_UNLIKELY(record_history_)) {
          trace(TraceEntry::OOM, nullptr, requested, stream, context);
        }
        raise_out_of_memory(requested, grow, /*device_work=*/false, /*expandable=*/true, lock);
      }
      ++stats_.num_alloc_retries;
      release_cached_blocks(lock);
    }
  }

  aclrtPhysicalMemProp physical_memory_prop(const ExpandableSegment& segment) const {
    aclrtPhysicalMemProp prop{};
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = segment.chunk >= (size_t{1} << 30) ? ACL_HBM_MEM_HUGE1G : ACL_HBM_MEM_HUGE;
    prop.location.id = static_cast<uint32_t>(device_);
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    return prop;
  }

  // Maps `bytes` (a multiple of the chunk) at the end of `segment`, a
  // physical chunk at a time; false, with nothing mapped, when the device
  // (or the process's memory fraction) is out of memory.
  bool map_chunks(ExpandableSegment& segment, size_t bytes) {
    if (reserved() + bytes > allowed_maximum_) {
      return false;
    }
    ensure_device_context(device_);
    const auto& api = acl::api();
    aclrtPhysicalMemProp prop = physical_memory_prop(segment);
    const size_t start = segment.mapped;
    while (segment.mapped < start + bytes) {
      aclrtDrvMemHandle handle = take_spare_chunk(segment.chunk);
      const aclError err = handle != nullptr ? ACL_SUCCESS : api.aclrtMallocPhysical(&handle, segment.chunk, &prop, 0);
      if (err == ACL_ERROR_RT_MEMORY_ALLOCATION || err == ACL_ERROR_BAD_ALLOC ||
          err == ACL_ERROR_RT_DEVICE_OOM) {
        api.aclGetRecentErrMsg(); // consumed: we report our own message
        unmap_chunks(segment, segment.mapped - start);
        return false;
      }
      NPU_CHECK(err);
      const aclError map_err = api.aclrtMapMem(segment.end(), segment.chunk, 0, handle, 0);
      if (map_err != ACL_SUCCESS) {
        api.aclrtFreePhysical(handle);
        unmap_chunks(segment, segment.mapped - start);
        NPU_CHECK(map_err);
      }
      segment.handles.push_back(handle);
      segment.mapped += segment.chunk;
    }
    return true;
  }

  // Unmaps the last `bytes` of `segment` and frees their physical memory;
  // returns the bytes that were mapped (holes were not).
  size_t unmap_chunks(ExpandableSegment& segment, size_t bytes) {
    const auto& api = acl::api();
    size_t unmapped = 0;
    for (; bytes > 0; bytes -= segment.chunk) {
      segment.mapped -= segment.chunk;
      if (segment.handles.back() == nullptr) {
        --segment.holes;
      } else {
        NPU_CHECK(api.aclrtUnmapMem(segment.end()));
        NPU_CHECK(api.aclrtFreePhysical(segment.handles.back()));
        unmapped += segment.chunk;
      }
      segment.handles.pop_back();
    }
    return unmapped;
  }

  // Note [Holes in expandable segments]: before `segment` grows, the whole
  // chunks inside its free blocks (not the last one, which the growth
  // extends) are unmapped and their physical memory freed, so that memory
  // freed in the middle is not held beside the new memory at the end. Queued
  // work of `stream` may still use a block freed on it (the runtime's unmap
  // is not stream-ordered): unless the stream is idle it is drained first,
  // without the lock, and only blocks freed before the drain began lose
  // chunks. Not while a capture is underway (draining would end it).
  // Returns whether the lock was released (the caller must look at the
  // segment again).
  bool unmap_free_middle_chunks(ExpandableSegment& segment, BlockPool& pool, aclrtStream stream,
                                std::unique_lock<std::mutex>& lock) {
    if (!captures_underway_.empty() || segment.last == nullptr ||
        chunks_to_unmap(segment, free_clock_, segment.last) == 0) {
      return false;
    }
    uint64_t safe_clock = free_clock_;
    bool unlocked = false;
    if (!stream_idle(stream)) {
      lock.unlock();
      ensure_device_context(device_);
      const aclError err = acl::api().aclrtSynchronizeStream(stream);
      lock.lock();
      NPU_CHECK(err);
      ++stats_.num_sync_all_streams;
      flush_free_lists();
      unlocked = true;
    }
    if (segment.last != nullptr) {
      unmap_free_chunks(segment, pool, stream, safe_clock, segment.last);
    }
    return unlocked;
  }

  // Note [Reclaiming free chunks]: before an expandable segment grows, and
  // before a block it hands out maps its holes if that would take reserved
  // memory past reclaim_budget() (1/32 over the most the program's blocks
  // ever held at once), the whole chunks inside the free blocks of every
  // expandable segment of the default pools whose stream is idle are
  // unmapped. Free memory of one segment (a small-pool segment a KV cache
  // outgrew, the gap a shorter cache left in the large one) is thus not held
  // beside new memory mapped for another. An idle stream has no queued work
  // that may use its freed blocks, so no drain is needed; the segments of a
  // busy stream keep their chunks until their own growth drains the stream
  // (Note [Holes in expandable segments]) or empty_cache. `keep` (the block
  // being handed out, or the growing segment's last block) keeps its
  // chunks. The physical memory moves rather than being freed and
  // allocated again (spare_chunks_), and the budget spares a program
  // below its own peak an unmap and a map at every allocation. Measured on
  // benchmarks/allocator_traces.py: kv-cache-large 1.195 -> 1.07 reserved
  // per requested byte; the rest is partial chunks at the ends of the
  // mapped runs.
  void reclaim_free_chunks(const Block* keep) {
    if (!captures_underway_.empty()) {
      return;
    }
    for (BlockPool* pool : {&default_blocks_.large, &default_blocks_.small}) {
      for (auto& [stream, segment] : pool->expandable) {
        if (segment == nullptr || chunks_to_unmap(*segment, free_clock_, keep) == 0 || !stream_idle(stream)) {
          continue;
        }
        unmap_free_chunks(*segment, *pool, stream, free_clock_, keep);
      }
    }
  }

  // Note [Reclaiming free chunks]: the reserved bytes up to which holes are
  // mapped without reclaiming first: the most memory blocks ever held at
  // once (counting `taking`, the block being handed out), plus 1/32 of it.
  // Below it, memory the program held before is mapped again for it
  // without moving chunks around at every allocation.
  size_t reclaim_budget(size_t taking) const {
    constexpr auto kAll = static_cast<size_t>(StatType::AGGREGATE);
    const auto held = static_cast<size_t>(std::max(stats_.allocated_bytes[kAll].peak,
                                                   stats_.allocated_bytes[kAll].current + static_cast<int64_t>(taking)));
    return held + held / 32;
  }

  // Whether `stream` has no queued or running work (its blocks freed so far
  // are used by nothing on the device). A stream the runtime no longer
  // knows (an external stream destroyed by its owner) counts as busy: its
  // segment keeps its chunks, and the allocation asking goes on.
  bool stream_idle(aclrtStream stream) const {
    ensure_device_context(device_);
    aclrtStreamStatus status = ACL_STREAM_STATUS_NOT_READY;
    if (acl::api().aclrtStreamQuery(stream, &status) != ACL_SUCCESS) {
      acl::api().aclGetRecentErrMsg(); // consumed: nothing to report
      return false;
    }
    return status == ACL_STREAM_STATUS_COMPLETE;
  }

  // Note [Reclaiming free chunks]: a chunk unmapped on the way to a mapping
  // keeps its physical memory, which the mapping takes first (no free and
  // malloc of the same bytes, and on the simulator no pages zeroed again);
  // what the mapping did not take is freed when the operation ends
  // (SpareChunksRelease), always under the lock.
  aclrtDrvMemHandle take_spare_chunk(size_t chunk) {
    for (auto it = spare_chunks_.begin(); it != spare_chunks_.end(); ++it) {
      if (it->first == chunk) {
        aclrtDrvMemHandle handle = it->second;
        spare_chunks_.erase(it);
        return handle;
      }
    }
    return nullptr;
  }

  void free_spare_chunks() {
    for (const auto& [chunk, handle] : spare_chunks_) {
      const aclError err = acl::api().aclrtFreePhysical(handle);
      if (err != ACL_SUCCESS) {
        TORCH_WARN("npu caching allocator: freeing a physical chunk failed (", acl::error_name(err), ")");
      }
    }
    spare_chunks_.clear();
  }

  // Frees the spare chunks left when a mapping operation ends, also by an
  // exception; only with the lock held (a path that released it freed them
  // before).
  struct SpareChunksRelease {
    DeviceCachingAllocator& allocator;
    std::unique_lock<std::mutex>& lock;
    ~SpareChunksRelease() {
      if (lock.owns_lock()) {
        allocator.free_spare_chunks();
      }
    }
  };

  // Whether the whole chunks of `b`, a block of `segment`, may be unmapped
  // now that every block freed at or before `safe_clock` is unused by the
  // device: free, cached in its pool, no other stream's use pending.
  static bool unmappable(const Block& b, uint64_t safe_clock, const Block* keep) {
    return &b != keep && !b.allocated && !b.in_free_list && b.event_count == 0 && b.stream_uses.empty() &&
        b.freed_at <= safe_clock;
  }

  // The mapped whole chunks inside the blocks of `segment` unmappable() accepts.
  static size_t chunks_to_unmap(const ExpandableSegment& segment, uint64_t safe_clock, const Block* keep) {
    size_t count = 0;
    for (const Block* b = segment.last; b != nullptr; b = b->prev) {
      if (!unmappable(*b, safe_clock, keep)) {
        continue;
      }
      const auto [first, end] = segment.chunks_inside(b->ptr, b->size);
      for (size_t i = first; i < end; ++i) {
        count += segment.handles[i] != nullptr ? 1 : 0;
      }
    }
    return count;
  }

  // Unmaps the chunks chunks_to_unmap() counts, leaving holes (Note [Holes
  // in expandable segments]); their physical memory waits in spare_chunks_
  // for the mapping that follows (Note [Reclaiming free chunks]).
  void unmap_free_chunks(ExpandableSegment& segment, BlockPool& pool, aclrtStream stream, uint64_t safe_clock,
                         const Block* keep) {
    const auto& api = acl::api();
    size_t unmapped = 0;
    const int64_t runs_before = segment.mapped_runs();
    for (Block* b = segment.last; b != nullptr; b = b->prev) {
      if (!unmappable(*b, safe_clock, keep)) {
        continue;
      }
      const auto [first, end] = segment.chunks_inside(b->ptr, b->size);
      for (size_t i = first; i < end; ++i) {
        if (segment.handles[i] == nullptr) {
          continue;
        }
        NPU_CHECK(api.aclrtUnmapMem(segment.chunk_at(i)));
        spare_chunks_.emplace_back(segment.chunk, segment.handles[i]);
        segment.handles[i] = nullptr;
        ++segment.holes;
        unmapped += segment.chunk;
        if (C10_UNLIKELY(record_history_)) {
          trace(TraceEntry::SEGMENT_UNMAP, segment.chunk_at(i), segment.chunk, stream, nullptr);
        }
      }
    }
    if (unmapped > 0) {
      ++stats_.num_device_free;
      update(stats_.reserved_bytes, pool, -static_cast<int64_t>(unmapped));
      update(stats_.segment, pool, segment.mapped_runs() - runs_before);
    }
  }

  // Maps the holes `block` (just taken for an allocation) touches. On an
  // out-of-memory device the cache is given back once, then the block goes
  // back to the pool and torch.OutOfMemoryError is raised.
  void fill_holes(Block& block, size_t requested, std::unique_lock<std::mutex>& lock,
                  const std::shared_ptr<c10::GatheredContext>& context) {
    ExpandableSegment& segment = *block.expandable;
    const SpareChunksRelease spares{*this, lock};
    for (int attempt = 0;; ++attempt) {
      const auto [first, end] = segment.chunks_touched(block.ptr, block.size);
      size_t missing = 0;
      for (size_t i = first; i < end; ++i) {
        missing += segment.handles[i] == nullptr ? segment.chunk : 0;
      }
      if (missing == 0) {
        return;
      }
      if (attempt == 0 && reserved() + missing > reclaim_budget(block.size)) {
        // Note [Reclaiming free chunks]. Marked in use meanwhile, so that
        // flushing the free lists cannot merge a neighbour into it.
        block.allocated = true;
        flush_free_lists();
        reclaim_free_chunks(&block);
        block.allocated = false;
      }
      const int64_t runs_before = segment.mapped_runs();
      if (map_holes(segment, first, end)) {
        update(stats_.reserved_bytes, *block.pool, static_cast<int64_t>(missing));
        update(stats_.segment, *block.pool, segment.mapped_runs() - runs_before);
        ++stats_.num_device_alloc;
        if (C10_UNLIKELY(record_history_)) {
          trace(TraceEntry::SEGMENT_MAP, segment.chunk_at(first), (end - first) * segment.chunk, block.stream,
                context);
        }
        return;
      }
      free_spare_chunks(); // before the lock is released
      if (attempt == 1) {
        ++stats_.num_ooms;
        if (C10_UNLIKELY(record_history_)) {
          trace(TraceEntry::OOM, nullptr, requested, block.stream, context);
        }
        merge_into_pool(&block);
        raise_out_of_memory(requested, missing, /*device_work=*/false, /*expandable=*/true, lock);
      }
      ++stats_.num_alloc_retries;
      // Out of the pool, and marked in use: releasing the cache must not
      // take it for a free tail.
      block.allocated = true;
      release_cached_blocks(lock);
      block.allocated = false;
    }
  }

  // Maps a new physical chunk at each hole among the chunks [first, end);
  // false, with those it mapped unmapped again, when the device (or the
  // process's memory fraction) is out of memory.
  bool map_holes(ExpandableSegment& segment, size_t first, size_t end) {
    size_t missing = 0;
    for (size_t i = first; i < end; ++i) {
      missing += segment.handles[i] == nullptr ? segment.chunk : 0;
    }
    if (reserved() + missing > allowed_maximum_) {
      return false;
    }
    ensure_device_context(device_);
    const auto& api = acl::api();
    aclrtPhysicalMemProp prop = physical_memory_prop(segment);
    std::vector<size_t> mapped_now;
    for (size_t i = first; i < end; ++i) {
      if (segment.handles[i] != nullptr) {
        continue;
      }
      aclrtDrvMemHandle handle = take_spare_chunk(segment.chunk);
      aclError err = handle != nullptr ? ACL_SUCCESS : api.aclrtMallocPhysical(&handle, segment.chunk, &prop, 0);
      if (err == ACL_SUCCESS) {
        err = api.aclrtMapMem(segment.chunk_at(i), segment.chunk, 0, handle, 0);
        if (err != ACL_SUCCESS) {
          api.aclrtFreePhysical(handle);
        }
      }
      if (err != ACL_SUCCESS) {
        const bool out_of_memory = err == ACL_ERROR_RT_MEMORY_ALLOCATION || err == ACL_ERROR_BAD_ALLOC ||
            err == ACL_ERROR_RT_DEVICE_OOM;
        if (out_of_memory) {
          api.aclGetRecentErrMsg(); // consumed: we report our own message
        }
        for (size_t j : mapped_now) {
          NPU_CHECK(api.aclrtUnmapMem(segment.chunk_at(j)));
          NPU_CHECK(api.aclrtFreePhysical(segment.handles[j]));
          segment.handles[j] = nullptr;
          ++segment.holes;
        }
        if (out_of_memory) {
          return false;
        }
        NPU_CHECK(err);
      }
      segment.handles[i] = handle;
      --segment.holes;
      mapped_now.push_back(i);
    }
    return true;
  }

  // Gives back the free tails of the expandable segments of `pools` whose
  // last block `releasable` accepts: the whole chunks at their ends that no
  // block uses. The caller drained the device (queued work may use a
  // cached block: unmapping is not stream-ordered) and flushed the free
  // lists.
  template <typename Predicate>
  void release_expandable_tails(PoolPair& pools, const Predicate& releasable) {
    for (BlockPool* pool : {&pools.large, &pools.small}) {
      for (auto& entry : pool->expandable) {
        ExpandableSegment* segment = entry.second.get();
        Block* last = segment != nullptr ? segment->last : nullptr;
        if (last == nullptr || last->allocated || last->in_free_list || last->event_count > 0 ||
            !last->stream_uses.empty() || !releasable(*last)) {
          continue;
        }
        const size_t offset = static_cast<size_t>(static_cast<char*>(last->ptr) - static_cast<char*>(segment->base));
        const size_t keep = segment->chunk * ((offset + segment->chunk - 1) / segment->chunk);
        if (keep >= segment->mapped) {
          continue;
        }
        const size_t released = segment->mapped - keep;
        pool_erase(last);
        if (C10_UNLIKELY(record_history_)) {
          trace(TraceEntry::SEGMENT_UNMAP, static_cast<char*>(segment->base) + keep, released, last->stream, nullptr);
        }
        const int64_t runs_before = segment->mapped_runs();
        const size_t unmapped = unmap_chunks(*segment, released);
        ++stats_.num_device_free;
        update(stats_.reserved_bytes, *pool, -static_cast<int64_t>(unmapped));
        update(stats_.segment, *pool, segment->mapped_runs() - runs_before);
        if (keep > offset) {
          last->size = keep - offset;
          pool_insert(last);
          continue;
        }
        segment->last = last->prev;
        if (last->prev != nullptr) {
          last->prev->next = nullptr;
        }
        delete last;
      }
    }
  }

  // `segment_size`: of the new segment, or what an expandable one had to grow by.
  [[noreturn]] void raise_out_of_memory(size_t requested, size_t segment_size, bool device_work, bool expandable,
                                        std::unique_lock<std::mutex>& lock) {
    const auto [free, total] = memory_info();
    const size_t allocated = static_cast<size_t>(
        stats_.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].current);
    const size_t reserved_now = reserved();
    std::string limit;
    if (allowed_maximum_ != std::numeric_limits<size_t>::max()) {
      limit = " This process is limited to " + format_size(allowed_maximum_) +
          " by torch.npu.set_per_process_memory_fraction(" +
          std::to_string(fraction_) + ").";
    }
    lock.unlock();
    notify_out_of_memory(device_, requested, free, total);
    TORCH_CHECK_WITH(
        OutOfMemoryError, false, "NPU out of memory. Tried to allocate ",
        format_size(requested), expandable ? " (growing an expandable segment by " : " (a new segment of ",
        format_size(segment_size), ")",
        device_work ? " for device work (a kernel's temporary or result)" : "", ". npu:",
        static_cast<int>(device_), " has a total capacity of ",
        format_size(total), " of which ", format_size(free), " is free.", limit,
        " Of the memory in use by this process, ", format_size(allocated),
        " is allocated by PyTorch and ", format_size(reserved_now - allocated),
        " is reserved by PyTorch but unallocated (", format_size(reserved_now),
        " reserved in total). Free tensors you no longer need, call "
        "torch.npu.empty_cache(), or reduce the batch size. If reserved but unallocated memory "
        "is large, set PYTORCH_NPU_ALLOC_CONF=expandable_segments:True to avoid fragmentation, "
        "or max_split_size_mb:<MiB> (e.g. 128) to limit it (see Note [Allocator settings], "
        "NPUAllocatorConfig.h).");
  }

  // Ends the activity of a block that is not parked: merges it with its
  // free neighbours and caches the result in the pool.
  void free_block(Block* block) {
    BlockPool& pool = *block->pool;
    update(stats_.active, pool, -1);
    update(stats_.active_bytes, pool, -static_cast<int64_t>(block->size));
    merge_into_pool(block);
  }

  void merge_into_pool(Block* block) {
    for (Block* neighbour : {block->prev, block->next}) {
      try_merge(block, neighbour);
    }
    pool_insert(block);
  }

  // Merges the free neighbour `src` into `dst` (not in the pool).
  void try_merge(Block* dst, Block* src) {
    if (src == nullptr || src->allocated || src->in_free_list || src->event_count > 0 ||
        !src->stream_uses.empty()) {
      return;
    }
    pool_erase(src);
    if (C10_UNLIKELY(src->expandable != nullptr) && src->expandable->last == src) {
      src->expandable->last = dst;
    }
    if (dst->prev == src) {
      dst->ptr = src->ptr;
      dst->prev = src->prev;
      dst->context_when_segment_allocated = std::move(src->context_when_segment_allocated);
      if (dst->prev != nullptr) {
        dst->prev->next = dst;
      }
    } else {
      dst->next = src->next;
      if (dst->next != nullptr) {
        dst->next->prev = dst;
      }
    }
    dst->size += src->size;
    dst->freed_at = std::max(dst->freed_at, src->freed_at);
    delete src;
  }

  void insert_events(Block* block) {
    for (const auto& stream : block->stream_uses) {
      NPUEvent event;
      event.record(NPUStream(stream));
      ++block->event_count;
      outstanding_events_.emplace_back(std::move(event), block);
    }
    block->stream_uses.clear();
  }

  void process_events(bool wait) {
    for (auto it = outstanding_events_.begin(); it != outstanding_events_.end();) {
      if (wait) {
        it->first.synchronize();
      } else if (!it->first.query()) {
        ++it;
        continue;
      }
      Block* block = it->second;
      it = outstanding_events_.erase(it);
      if (--block->event_count == 0) {
        if (C10_UNLIKELY(record_history_)) {
          trace(TraceEntry::FREE_COMPLETED, block->ptr, block->size, block->stream, nullptr);
        }
        free_block(block);
      }
    }
  }

  // Returns whole cached segments to the runtime: of `only` if given, else
  // of the default and device-work pools and of every private pool no
  // longer in use (which then goes once empty). Work still queued on the
  // device may use cached blocks of its own stream, so drain it first (the
  // runtime's free is not stream-ordered). The lock is released while the
  // device drains: device work running meanwhile may need it to allocate
  // (Note [Device-work memory]). Tensor blocks freed during the drain may be
  // used by work queued after it began: they stay cached. Called and returns
  // with `lock` held.
  void release_cached_blocks(std::unique_lock<std::mutex>& lock, PoolPair* only = nullptr) {
    const uint64_t drain_began = drain_device(lock);
    const auto freed_before_drain = [drain_began](const Block& b) { return b.freed_at <= drain_began; };
    if (only != nullptr) {
      release_segments(*only, freed_before_drain);
      return;
    }
    release_segments(default_blocks_, freed_before_drain);
    release_expandable_tails(default_blocks_, freed_before_drain);
    // Freed device-work memory is never used by queued work, whenever freed.
    release_segments(device_work_blocks_, [](const Block&) { return true; });
    for (auto it = private_pools_.begin(); it != private_pools_.end();) {
      PrivatePool& pool = *it->second;
      if (pool.use_count > 0) {
        ++it;
        continue;
      }
      release_segments(pool.blocks, freed_before_drain);
      const bool empty = pool.live_blocks == 0 && pool.blocks.large.blocks.empty() && pool.blocks.small.blocks.empty();
      it = empty ? private_pools_.erase(it) : std::next(it);
    }
  }

  // Waits for all work queued on the device, without the lock (device work
  // running meanwhile may need it: Note [Device-work memory]), then settles
  // the events and free lists. Returns the free clock when the drain began:
  // blocks freed after it may still be used by work queued after it. Called
  // and returns with `lock` held.
  uint64_t drain_device(std::unique_lock<std::mutex>& lock) {
    const uint64_t drain_began = free_clock_;
    lock.unlock();
    ensure_device_context(device_);
    const aclError err = acl::api().aclrtSynchronizeDevice();
    lock.lock();
    NPU_CHECK(err);
    ++stats_.num_sync_all_streams;
    process_events(/*wait=*/false); // those recorded before the drain are done
    flush_free_lists();
    return drain_began;
  }

  // Returns the whole cached segments of `pools` that `releasable` accepts.
  template <typename Predicate>
  void release_segments(PoolPair& pools, const Predicate& releasable) {
    for (BlockPool* pool : {&pools.large, &pools.small}) {
      for (auto it = pool->blocks.begin(); it != pool->blocks.end();) {
        Block* block = *it;
        // Expandable segments give back their free tails instead
        // (release_expandable_tails).
        if (block->is_split() || block->expandable != nullptr || !releasable(*block)) {
          ++it;
          continue;
        }
        it = pool->blocks.erase(it);
        if (C10_UNLIKELY(record_history_)) {
          trace(TraceEntry::SEGMENT_FREE, block->ptr, block->size, block->stream, nullptr);
        }
        NPU_CHECK(acl::api().aclrtFree(block->ptr));
        ++stats_.num_device_free;
        update(stats_.segment, *pool, -1);
        update(stats_.reserved_bytes, *pool, -static_cast<int64_t>(block->size));
        if (block->size >= max_split_size_) {
          stats_.oversize_segments.decrease(1);
        }
        delete block;
      }
    }
  }

  // garbage_collection_threshold (Note [Allocator settings]): called before
  // a new segment. While more than threshold * allowed maximum is reserved,
  // frees whole cached segments of the default and device-work pools, least
  // recently freed first: a block freed long ago is one the program stopped
  // reusing. As release_cached_blocks, tensor memory is released only after
  // draining the device, and only if freed before the drain; device work
  // (which cannot drain the device it runs on) collects only device-work
  // memory. Private pools belong to their graphs and are left alone.
  void garbage_collect(bool device_work, std::unique_lock<std::mutex>& lock) {
    const auto limit = static_cast<size_t>(gc_threshold_ * static_cast<double>(allowed_maximum_));
    if (reserved() <= limit) {
      return;
    }
    flush_free_lists();
    const auto whole = [](const BlockPool& pool) {
      return std::any_of(pool.blocks.begin(), pool.blocks.end(), [](const Block* b) { return !b->is_split(); });
    };
    const bool tensor_memory = !device_work && (whole(default_blocks_.large) || whole(default_blocks_.small));
    if (!tensor_memory && !whole(device_work_blocks_.large) && !whole(device_work_blocks_.small)) {
      return; // nothing to free: spare the drain
    }
    const uint64_t drain_began = tensor_memory ? drain_device(lock) : free_clock_;
    // The free times of the releasable segments, oldest first, up to the
    // one that brings reserved memory to the limit: release_segments then
    // frees exactly those.
    std::vector<std::pair<uint64_t, size_t>> candidates; // (freed_at, size)
    const auto collect = [&](const PoolPair& pair, bool any_time) {
      for (const BlockPool* pool : {&pair.large, &pair.small}) {
        for (const Block* b : pool->blocks) {
          if (!b->is_split() && (any_time || b->freed_at <= drain_began)) {
            candidates.emplace_back(b->freed_at, b->size);
          }
        }
      }
    };
    collect(device_work_blocks_, true);
    if (tensor_memory) {
      collect(default_blocks_, false);
    }
    std::sort(candidates.begin(), candidates.end());
    uint64_t cutoff = 0;
    size_t remaining = reserved();
    for (const auto& [freed_at, size] : candidates) {
      if (remaining <= limit) {
        break;
      }
      cutoff = freed_at;
      remaining -= size;
    }
    release_segments(device_work_blocks_, [cutoff](const Block& b) { return b.freed_at <= cutoff; });
    if (tensor_memory) {
      release_segments(default_blocks_, [cutoff, drain_began](const Block& b) {
        return b.freed_at <= cutoff && b.freed_at <= drain_began;
      });
    }
  }

  void apply_settings_locked(const AllocatorSettings& settings) {
    // torch_npu: with page_size set, its segment size is the only rule.
    const size_t max_split = settings.page_size != 0 ? AllocatorSettings::kUnlimited : settings.max_split_size;
    divisions_ = settings.roundup_power2_divisions;
    gc_threshold_ = settings.garbage_collection_threshold;
    page_size_ = settings.page_size;
    expandable_growth_ = settings.segment_size;
    large_segment_size_ = settings.large_segment_size;
    large_block_alignment_ = settings.base_addr_aligned_kb * 1024;
    expandable_segments_ = settings.expandable_segments;
    if (max_split != max_split_size_) {
      max_split_size_ = max_split;
      recount_oversize();
    }
    // As CUDA's: the largest block that may be split, -1 if any.
    stats_.max_split_size = static_cast<int64_t>(max_split_size_);
  }

  // roundup_power2_divisions for a request of `size` bytes.
  // The size of the block a request takes: rounded (roundup_power2_divisions),
  // and for the large pool a multiple of base_addr_aligned_kb, so that every
  // large block starts at an address aligned to it (segments start on
  // pages, blocks are carved from their fronts).
  size_t block_size_for(size_t requested) const {
    const size_t size = round_size(requested, divisions_for(requested));
    if (size <= kSmallSize || large_block_alignment_ <= kMinBlockSize) {
      return size;
    }
    return large_block_alignment_ * ((size + large_block_alignment_ - 1) / large_block_alignment_);
  }

  uint32_t divisions_for(size_t size) const {
    return size == 0 ? 0 : divisions_[static_cast<size_t>(std::bit_width(size)) - 1];
  }

  // After max_split_size changed: the oversize counts under the new limit,
  // so that frees counted against it balance. Walks every segment once.
  void recount_oversize() {
    std::set<Block*> heads;
    const auto add = [&heads](Block* b) {
      while (b->prev != nullptr) {
        b = b->prev;
      }
      heads.insert(b);
    };
    int64_t allocations = 0;
    for (const auto& entry : allocated_blocks_) {
      add(entry.second);
      allocations += entry.second->size >= max_split_size_ ? 1 : 0;
    }
    for (const auto& entry : outstanding_events_) {
      add(entry.second);
    }
    for (const FreeList& list : free_lists_) {
      for (int i = 0; i < list.count; ++i) {
        add(list.blocks[i]);
      }
    }
    std::vector<PoolPair*> pairs = {&default_blocks_, &device_work_blocks_};
    for (auto& entry : private_pools_) {
      pairs.push_back(&entry.second->blocks);
    }
    for (PoolPair* pair : pairs) {
      for (BlockPool* pool : {&pair->large, &pair->small}) {
        for (Block* b : pool->blocks) {
          add(b);
        }
      }
    }
    int64_t segments = 0;
    for (Block* head : heads) {
      size_t size = 0;
      for (Block* b = head; b != nullptr; b = b->next) {
        size += b->size;
      }
      segments += size >= max_split_size_ ? 1 : 0;
    }
    const auto set_current = [](Stat& stat, int64_t value) {
      if (value > stat.current) {
        stat.increase(static_cast<size_t>(value - stat.current));
      } else if (value < stat.current) {
        stat.decrease(static_cast<size_t>(stat.current - value));
      }
    };
    set_current(stats_.oversize_allocations, allocations);
    set_current(stats_.oversize_segments, segments);
  }

  const c10::DeviceIndex device_;
  std::mutex mutex_;
  DeviceStats stats_;
  // Memory history: off (record_history_ false) costs one test per
  // allocation and free. The recorder is read without the lock.
  bool record_history_ = false;
  RecordContext record_context_ = RecordContext::NEVER;
  std::atomic<CreateContextFn> context_recorder_{nullptr};
  size_t max_trace_entries_ = 1;
  std::vector<TraceEntry> trace_; // a ring once full
  size_t trace_next_ = 0;         // its oldest entry, once full
  PoolPair default_blocks_;
  PoolPair device_work_blocks_; // Note [Device-work memory]
  // Note [Private pools]: by id, and the allocations underway to them.
  std::map<c10::MempoolId_t, std::unique_ptr<PrivatePool>> private_pools_;
  std::vector<std::pair<c10::MempoolId_t, std::function<bool(aclrtStream)>>> captures_underway_;
  // Note [Frees during a capture]: blocks freed while a capture was underway
  // and used by other streams; their events are recorded when no capture
  // is underway any more (end_allocate_to_pool).
  std::vector<Block*> frees_deferred_until_no_capture_;
  uint64_t capture_serials_ = 0;
  std::deque<std::pair<NPUEvent, Block*>> outstanding_events_;
  // Physical chunks between their unmapping and a mapping in the same
  // operation, with their size (Note [Reclaiming free chunks]).
  std::vector<std::pair<size_t, aclrtDrvMemHandle>> spare_chunks_;
  std::array<FreeList, kFreeListSlots> free_lists_{};
  uint64_t free_list_clock_ = 0; // orders the lists' last uses
  uint64_t free_clock_ = 0;      // counts frees (Block::freed_at)
  // Live allocations by address, for raw_delete and record_stream.
  ska::flat_hash_map<void*, Block*> allocated_blocks_;
  double fraction_ = 1.0;
  size_t allowed_maximum_ = std::numeric_limits<size_t>::max();
  // Note [Allocator settings], as apply_settings_locked copies them.
  AllocatorSettings::Divisions divisions_{};
  size_t max_split_size_ = AllocatorSettings::kUnlimited;
  double gc_threshold_ = 0.0;
  size_t page_size_ = 0;
  size_t expandable_growth_ = 0; // segment_size_mb: least growth of a large-pool expandable segment
  size_t large_segment_size_ = kLargeBuffer; // large_segment_size_mb
  size_t large_block_alignment_ = 16 * 1024; // base_addr_aligned_kb
  bool expandable_segments_ = false;
};

void delete_device_ptr(void* ptr);

class NPUAllocatorImpl final : public NPUAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const auto device = current_device();
    if (nbytes == 0) {
      return {nullptr, nullptr, &delete_device_ptr,
              c10::Device(c10::DeviceType::PrivateUse1, device)};
    }
    void* ptr = malloc(device, nbytes, getCurrentNPUStream(device).stream());
    return {ptr, ptr, &delete_device_ptr,
            c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &delete_device_ptr;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count == 0) {
      return;
    }
    const NPUStream stream = getCurrentNPUStream();
    NPU_CHECK(acl::api().aclrtMemcpyAsync(
        dest, count, src, count, ACL_MEMCPY_DEVICE_TO_DEVICE, stream.stream()));
    stream.synchronize();
  }

  bool initialized() override {
    return true;
  }

  void emptyCache(c10::MempoolId_t mempool_id) override {
    if (mempool_id == c10::MempoolId_t{0, 0}) {
      empty_cache_all();
      return;
    }
    // A private pool lives on the device it was created on.
    bool found = false;
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      auto* allocator = existing(d);
      if (allocator != nullptr) {
        const auto ids = allocator->private_pool_ids();
        if (std::find(ids.begin(), ids.end(), mempool_id) != ids.end()) {
          allocator->empty_cache(mempool_id);
          found = true;
        }
      }
    }
    TORCH_CHECK(found, "emptyCache: no npu memory pool (", mempool_id.first, ", ", mempool_id.second, ")");
  }

  void empty_cache_all() override {
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      if (auto* allocator = existing(d)) {
        allocator->empty_cache();
      }
    }
  }

  void recordStream(const c10::DataPtr& data_ptr, c10::Stream stream) override {
    if (data_ptr.get() == nullptr) {
      return;
    }
    auto* allocator = allocator_of(data_ptr, stream, "record_stream");
    TORCH_CHECK(allocator != nullptr && allocator->record_stream(data_ptr.get(), stream),
                "record_stream: the tensor's memory was not allocated by the NPU caching allocator");
  }

  bool allocated_on(const c10::DataPtr& data_ptr, NPUStream stream) {
    if (data_ptr.get() == nullptr || data_ptr.device().type() != c10::DeviceType::PrivateUse1) {
      return false;
    }
    auto* allocator = existing(data_ptr.device().index());
    return allocator != nullptr && allocator->allocated_on(data_ptr.get(), stream.stream());
  }

  void eraseStream(const c10::DataPtr& data_ptr, c10::Stream stream) {
    if (data_ptr.get() == nullptr) {
      return;
    }
    auto* allocator = allocator_of(data_ptr, stream, "erase_stream");
    TORCH_CHECK(allocator != nullptr && allocator->erase_stream(data_ptr.get(), stream),
                "erase_stream: the tensor's memory was not allocated by the NPU caching allocator");
  }

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_device_index(device);
    auto* allocator = existing(device);
    return allocator ? allocator->stats() : DeviceStats();
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_device_index(device);
    if (auto* allocator = existing(device)) {
      allocator->reset_accumulated_stats();
    }
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    check_device_index(device);
    if (auto* allocator = existing(device)) {
      allocator->reset_peak_stats();
    }
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_device_index(device);
    return device_allocator(device).memory_info();
  }

  void* raw_alloc(size_t nbytes) override {
    if (nbytes == 0) {
      return nullptr;
    }
    const auto device = current_device();
    return malloc(device, nbytes, getCurrentNPUStream(device).stream());
  }

  void* raw_alloc_with_stream(size_t nbytes, aclrtStream stream) override {
    if (nbytes == 0) {
      return nullptr;
    }
    return malloc(current_device(), nbytes, stream);
  }

  void raw_delete(void* ptr) override {
    free(ptr);
  }

  void* device_work_malloc(c10::DeviceIndex device, size_t nbytes) {
    return device_allocator(device).malloc_device_work(nbytes);
  }

  DeviceCachingAllocator& for_device(c10::DeviceIndex device) {
    return device_allocator(device);
  }

  // Settings changed at run time reach the allocators created already;
  // later ones read them when created. create_mutex_ orders the two.
  void apply_settings(const std::string& config) {
    std::lock_guard<std::mutex> lock(create_mutex_);
    const AllocatorSettings settings = AllocatorConfig::update(config);
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      if (auto* allocator = existing(d)) {
        allocator->apply_settings(settings);
      }
    }
  }

  void set_memory_fraction(double fraction, c10::DeviceIndex device) override {
    check_device_index(device);
    TORCH_CHECK(
        fraction >= 0 && fraction <= 1, "Invalid memory fraction ", fraction,
        ": set_per_process_memory_fraction takes a value between 0 and 1.");
    device_allocator(device).set_memory_fraction(fraction);
  }

  double get_memory_fraction(c10::DeviceIndex device) override {
    check_device_index(device);
    auto* allocator = existing(device);
    return allocator ? allocator->memory_fraction() : 1.0;
  }

  void free(void* ptr) {
    if (ptr == nullptr) {
      return;
    }
    // Each device's allocator keeps its own address map under the lock it
    // takes anyway, so a pair costs one lock each way. Memory is nearly
    // always freed with its device current: ask that one first.
    const c10::DeviceIndex current = current_device();
    auto* allocator = existing(current);
    if (C10_LIKELY(allocator != nullptr && allocator->free(ptr))) {
      return;
    }
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      allocator = d == current ? nullptr : existing(d);
      if (allocator != nullptr && allocator->free(ptr)) {
        return;
      }
    }
    TORCH_CHECK(false, "NPU caching allocator: invalid device pointer ", ptr);
  }

 private:
  void* malloc(c10::DeviceIndex device, size_t nbytes, aclrtStream stream) {
    if (C10_UNLIKELY(!used_.load(std::memory_order_relaxed))) {
      used_.store(true, std::memory_order_relaxed);
    }
    return device_allocator(device).malloc(nbytes, stream);
  }

  // The allocator of `data_ptr`'s device, checking that `stream` is a
  // stream of that device (a block's uses are ordered by events of its own
  // device); null if it is not npu memory.
  DeviceCachingAllocator* allocator_of(const c10::DataPtr& data_ptr, c10::Stream stream, const char* api) {
    const c10::Device device = data_ptr.device();
    if (device.type() != c10::DeviceType::PrivateUse1) {
      return nullptr;
    }
    TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1 && stream.device_index() == device.index(),
                api, ": the tensor is on ", device, " but the stream is on ", stream.device(),
                "; pass a stream of the tensor's device (torch.npu.current_stream(tensor.device))");
    return existing(device.index());
  }

  DeviceCachingAllocator* existing(c10::DeviceIndex device) {
    return device_allocators_[device].load(std::memory_order_acquire);
  }

  DeviceCachingAllocator& device_allocator(c10::DeviceIndex device) {
    DeviceCachingAllocator* allocator = existing(device);
    if (C10_LIKELY(allocator != nullptr)) {
      return *allocator;
    }
    check_device_index(device);
    std::lock_guard<std::mutex> lock(create_mutex_);
    allocator = existing(device);
    if (allocator == nullptr) {
      allocator = new DeviceCachingAllocator(device);
      device_allocators_[device].store(allocator, std::memory_order_release);
    }
    return *allocator;
  }

  std::mutex create_mutex_;
  std::array<std::atomic<DeviceCachingAllocator*>, kMaxDevices> device_allocators_{};

 public:
  // Whether tensor memory was ever allocated (Note [Pluggable allocators]).
  std::atomic<bool> used_{false};
};

// Leaked on purpose: tensors may be freed by other static destructors.
NPUAllocatorImpl* const g_allocator = new NPUAllocatorImpl();

void delete_device_ptr(void* ptr) {
  g_allocator->free(ptr);
}

struct RegisterAllocator {
  RegisterAllocator() {
    c10::SetAllocator(c10::DeviceType::PrivateUse1, g_allocator);
  }
} g_register_allocator;

} // namespace

// Note [Pluggable allocators] (NPUPluggableAllocator.h).
std::atomic<NPUAllocator*> g_current{g_allocator};

NPUAllocator* get() {
  return g_current.load(std::memory_order_acquire);
}

bool installCurrentAllocator(NPUAllocator* allocator) {
  if (g_allocator->used_.load()) {
    return false;
  }
  c10::SetAllocator(c10::DeviceType::PrivateUse1, allocator);
  g_current.store(allocator, std::memory_order_release);
  return true;
}

namespace {

void check_caching_allocator(const char* what) {
  TORCH_CHECK(get() == g_allocator, what,
              " needs the NPU caching allocator, but an NPUPluggableAllocator is installed "
              "(torch.npu.memory.change_current_allocator)");
}

} // namespace

DeviceStats getDeviceStats(c10::DeviceIndex device) {
  return g_allocator->getDeviceStats(device);
}

void emptyCache() {
  g_allocator->empty_cache_all();
}

void recordStream(const c10::DataPtr& ptr, NPUStream stream) {
  get()->recordStream(ptr, stream.unwrap());
}

void eraseStream(const c10::DataPtr& ptr, NPUStream stream) {
  if (get() != g_allocator) {
    return; // a pluggable allocator records no stream uses either
  }
  g_allocator->eraseStream(ptr, stream.unwrap());
}

bool isAllocatedOn(const c10::DataPtr& ptr, NPUStream stream) {
  return g_allocator->allocated_on(ptr, stream);
}

void* getBaseAllocation(const c10::DataPtr& ptr, size_t* size) {
  if (get() != g_allocator || ptr.device().type() != c10::DeviceType::PrivateUse1 || ptr.get() == nullptr) {
    return nullptr;
  }
  return g_allocator->for_device(ptr.device().index()).base_allocation(ptr.get(), size);
}

void* allocate_device_work_memory(c10::DeviceIndex device, size_t nbytes) {
  return nbytes == 0 ? nullptr : g_allocator->device_work_malloc(device, nbytes);
}

void free_device_work_memory(void* ptr) {
  g_allocator->raw_delete(ptr);
}

void beginAllocateToPool(
    c10::DeviceIndex device, c10::MempoolId_t mempool_id, std::function<bool(aclrtStream)> filter) {
  const bool is_default = mempool_id == c10::MempoolId_t{0, 0};
  TORCH_CHECK(!is_default, "beginAllocateToPool: (0, 0) is the default pool's id");
  check_caching_allocator("A private memory pool (graph capture or MemPool)");
  g_allocator->for_device(device).begin_allocate_to_pool(mempool_id, std::move(filter));
}

bool allocatedByCaptureUnderway(c10::DeviceIndex device, const void* ptr) {
  return g_allocator->for_device(device).allocated_by_capture_underway(ptr);
}

void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) {
  g_allocator->for_device(device).end_allocate_to_pool(mempool_id);
}

void createOrIncrefPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) {
  check_caching_allocator("A MemPool");
  g_allocator->for_device(device).create_or_incref_pool(mempool_id);
}

void releasePool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) {
  g_allocator->for_device(device).release_pool(mempool_id);
}

std::vector<c10::MempoolId_t> privatePoolIds(c10::DeviceIndex device) {
  return g_allocator->for_device(device).private_pool_ids();
}

void recordHistory(bool enabled, CreateContextFn context_recorder, size_t max_entries, RecordContext when) {
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
    g_allocator->for_device(d).record_history(enabled, context_recorder, max_entries, when);
  }
}

void attachOutOfMemoryObserver(OutOfMemoryObserver observer) {
  std::lock_guard<std::mutex> lock(g_oom_observers_mutex);
  g_oom_observers.push_back(std::move(observer));
}

SnapshotInfo snapshot() {
  SnapshotInfo info;
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
    info.device_traces.emplace_back();
    g_allocator->for_device(d).snapshot(&info.segments, &info.device_traces.back());
  }
  return info;
}

void setAllocatorSettings(const std::string& config) {
  g_allocator->apply_settings(config);
}

c10::MempoolId_t graph_pool_handle() {
  // (0, n) for graphs' pools, as CUDA's; user MemPools take (n, 0).
  static std::atomic<c10::CaptureId_t> next{1};
  return {0, next.fetch_add(1, std::memory_order_relaxed)};
}

} // namespace c10_npu::NPUCachingAllocator
