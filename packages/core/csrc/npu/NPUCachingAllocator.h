// The caching device allocator for npu tensors, modelled on c10/cuda's
// CUDACachingAllocator.
//
// Device memory is taken from the runtime in segments and carved into blocks
// that are cached per stream after free, so steady-state allocation never
// calls the runtime. A block used on another stream (record_stream) returns
// to the cache only once events recorded on those streams complete.
// Statistics use torch.cuda's names (memory_stats). Running out of memory
// first frees the cache, then raises torch.OutOfMemoryError with the numbers.
//
// Blocks are cached by (stream, pool): a block is reused only by requests of
// the stream it was allocated on and from the pool it belongs to, which is
// the default pool, the device-work pool or a private pool.
//
// Note [Device-work memory]
// Device work may allocate too (allocate_device_work_memory, below): the
// temporaries and results of a CPU kernel running as device work. Those
// blocks live in a pool of their own, never reused for tensors, and device
// work frees them before it ends, so no queued work ever uses freed
// device-work memory: its cache can be released at any time, also from
// device work, which cannot drain the device it runs on. Emptying the cache
// does not hold the allocator's lock while it drains the device, since
// device work running meanwhile may need it.
//
// Note [Private pools]
// A capture (NPUGraph) or a MemPool allocates from a private pool, named by
// a MempoolId: between beginAllocateToPool and endAllocateToPool, requests
// on the streams the filter accepts (the capturing stream) take blocks from
// that pool only, and blocks freed into it are reused only by it, also
// after the capture ended. A graph's replays write the memory its capture
// allocated, so none of it may serve other tensors while the graph lives:
// the pool's memory goes back to the device (at the next empty_cache or
// OOM retry) only once every holder called releasePool and its blocks are
// free. The pool's id is the graph's or MemPool's (graph_pool_handle); two
// graphs share memory by sharing an id. Ids are device-local.
//
// Note [Frees during a capture]
// A block freed while it is used by other streams (record_stream, a
// collective's communicator stream) is cached only once events recorded on
// those streams complete. While a capture is underway those streams may be
// capturing, and an event recorded there would complete only at a replay:
// querying it would invalidate the capture. So such frees are deferred:
// their events are recorded, and the blocks become reusable, when no
// capture is underway any more; the allocator queries no event meanwhile.
//
// Note [Expandable segments]
// With expandable_segments:True (Note [Allocator settings]), new memory of
// the default pool does not come in new segments: each (stream, size
// class) of it has one expandable segment, a range of virtual addresses as
// large as the device's memory, reserved on first use
// (aclrtReserveMemAddress), of which a prefix is mapped to physical chunks
// (aclrtMallocPhysical + aclrtMapMem, one handle per chunk of the runtime's
// granularity, at least 2 MiB; 1 GiB for large blocks with page_size:1g).
// Its blocks tile the mapped prefix and split and merge as in any segment.
// When no cached block fits, the segment grows at its end: its free last
// block grows (or a new block follows the last one), so the memory is never
// copied and the free memory at the end is never stranded as it is in a
// too-small fixed segment. empty_cache (and the OOM retry) unmaps the whole
// chunks at the end that its free last block covers and frees their
// physical memory, after draining the device as for fixed segments.
// Note [Holes in expandable segments]: free memory in the middle gives its
// physical memory back when the segment is about to grow: the whole chunks
// inside free blocks (freed while the segment's stream is idle, or before
// a drain of it, since unmapping is not stream-ordered) are unmapped,
// leaving holes in the address range; a block taken for an allocation maps
// the holes it touches first. A large request takes the lowest-addressed
// free block that fits, from its front, so that the live blocks pack into
// few runs of mapped chunks (Note [Placement in expandable segments] in
// NPUCachingAllocator.cpp). Before any segment maps memory beyond what the
// program has needed (1/32 over its peak), the free chunks of every segment
// whose stream is idle go back as well (Note [Reclaiming free chunks] in
// NPUCachingAllocator.cpp). A KV cache that grows token by token (each longer cache
// allocated before the shorter one is freed) thus holds its live caches
// plus less than a chunk per free block, instead of every cache size it
// went through. Statistics count an expandable
// segment as one segment while anything is mapped, its mapped bytes as
// reserved; snapshots show it with is_expandable and the trace has
// segment_map / segment_unmap, as torch.cuda's.
// - The code is the same on CANN and on the simulator (which maps its
//   memfd's pages at the reserved addresses): only the acl function table.
// - Runtimes without virtual memory (CANN before 8.0.0, the simulator
//   emulating one) keep fixed segments, with a warning. So does a stream
//   whose range cannot be reserved (address space exhausted), and a request
//   the range has no room left for.
// - Private pools (graphs, MemPool) and device-work memory keep fixed
//   segments: their segments are released whole by their own rules (a
//   pool's at its release, device-work memory without draining), which
//   growing ranges would not simplify.
// - Turning the setting on or off at run time (_set_allocator_settings)
//   applies to new memory only: fixed segments allocated before stay and
//   serve requests as before; expandable segments keep serving their mapped
//   blocks after it is turned off, grow no more, and give back their free
//   ends at empty_cache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <c10/core/CachingDeviceAllocator.h>

#include "npu/Macros.h"
#include "npu/NPUStream.h"

namespace c10_npu::NPUCachingAllocator {

using c10::CachingDeviceAllocator::DeviceStats;

class TORCH_NPU_API NPUAllocator : public c10::DeviceAllocator {
 public:
  // Raw allocation on the current stream of the current device (or `stream`).
  virtual void* raw_alloc(size_t nbytes) = 0;
  virtual void* raw_alloc_with_stream(size_t nbytes, aclrtStream stream) = 0;
  virtual void raw_delete(void* ptr) = 0;
  // Caps this process's reserved memory on `device` at fraction * capacity.
  virtual void set_memory_fraction(double fraction, c10::DeviceIndex device) = 0;
  virtual double get_memory_fraction(c10::DeviceIndex device) = 0;
  // Releases cached blocks of every device.
  virtual void empty_cache_all() = 0;
};

// The allocator of npu tensors: the caching allocator, or the allocator
// change_current_allocator installed (Note [Pluggable allocators],
// NPUPluggableAllocator.h).
TORCH_NPU_API NPUAllocator* get();
// Makes `allocator` the allocator of npu tensors (and c10's for the npu
// device type) unless the caching allocator has allocated tensor memory
// already; false then. Use changeCurrentAllocator (NPUPluggableAllocator.h).
TORCH_NPU_API bool installCurrentAllocator(NPUAllocator* allocator);

// Convenience wrappers used by kernels and plugins.
TORCH_NPU_API DeviceStats getDeviceStats(c10::DeviceIndex device);
TORCH_NPU_API void emptyCache();
// A use of the memory on `stream` (Tensor.record_stream): once freed, the
// block is reused only after the work queued on `stream` until then is done.
// `stream` must be on the memory's device.
TORCH_NPU_API void recordStream(const c10::DataPtr& ptr, NPUStream stream);
// Removes the use on `stream` that recordStream added (torch_npu.erase_stream;
// nothing if there is none): the block is reused as soon as it is freed. The
// caller must have ordered the block's later users after the work on
// `stream` (an event wait), or that work may see its memory reused.
TORCH_NPU_API void eraseStream(const c10::DataPtr& ptr, NPUStream stream);
// Whether `ptr` is live memory of the caching allocator allocated on
// `stream`: once freed, only requests of `stream` reuse it, so work queued
// on `stream` after an event wait is ordered after what the event covers
// (what lets a collective's Work.wait() erase its stream's use).
TORCH_NPU_API bool isAllocatedOn(const c10::DataPtr& ptr, NPUStream stream);
// The memory through which a process shares the live block at `ptr` with
// other processes (torch.multiprocessing, Note [npu tensors between
// processes], torch_npu/multiprocessing/reductions.py): the whole fixed
// segment holding it, as CUDA's allocator shares a block's segment, or the
// block alone in an expandable segment (whose range may be mostly
// unmapped). Null, with `size` untouched, if `ptr` is not a live block of
// the caching allocator (a pluggable allocator's memory).
TORCH_NPU_API void* getBaseAllocation(const c10::DataPtr& ptr, size_t* size);

// Device memory for device work to allocate while it runs: the temporaries
// and results of a CPU kernel running as device work (the ops package), so
// that they count in the device's memory statistics and its capacity. It is
// cached apart from tensor memory, and device work frees it before it ends:
// no queued work ever uses freed device-work memory, so it may be allocated
// and its cache released from device work, which cannot drain the device it
// runs on. Raises torch.OutOfMemoryError; null for 0 bytes.
TORCH_NPU_API void* allocate_device_work_memory(c10::DeviceIndex device, size_t nbytes);
TORCH_NPU_API void free_device_work_memory(void* ptr);

// Note [Private pools]. beginAllocateToPool creates pool `mempool_id` of
// `device` or adds a use of it; `filter` is called with the allocator's
// lock held and must not allocate.
TORCH_NPU_API void beginAllocateToPool(
    c10::DeviceIndex device, c10::MempoolId_t mempool_id, std::function<bool(aclrtStream)> filter);
TORCH_NPU_API void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id);
// Whether `ptr` (an allocation's base) was allocated by a graph capture still
// underway: memory whose contents only the graph's replays will write
// (Note [Work beside a capture], NPUGraphsUtils.h).
TORCH_NPU_API bool allocatedByCaptureUnderway(c10::DeviceIndex device, const void* ptr);
TORCH_NPU_API void releasePool(c10::DeviceIndex device, c10::MempoolId_t mempool_id);
// Creates pool `mempool_id` or adds a use of it (what a MemPool holds).
TORCH_NPU_API void createOrIncrefPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id);
// The private pools `device` has (in use or still holding memory).
TORCH_NPU_API std::vector<c10::MempoolId_t> privatePoolIds(c10::DeviceIndex device);
// A fresh id for a graph's private pool.
TORCH_NPU_API c10::MempoolId_t graph_pool_handle();

// ---- Memory history and snapshots (torch.npu.memory._record_memory_history,
// _snapshot), in the terms of CUDA's allocator so that torch's memory_viz
// reads them.

// What a recorded stack belongs to: nothing, the live state (segments and
// blocks), also allocations in the trace, or allocations and frees.
enum class RecordContext { NEVER = 0, STATE = 1, ALLOC = 2, ALL = 3 };
using CreateContextFn = std::shared_ptr<c10::GatheredContext> (*)();

struct TraceEntry {
  // SEGMENT_MAP / SEGMENT_UNMAP: an expandable segment grew or shrank.
  enum Action { ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP, OOM };
  Action action;
  c10::DeviceIndex device;
  uintptr_t addr; // for OOM: the device's free bytes
  size_t size;
  aclrtStream stream;
  int64_t time_us;
  std::shared_ptr<c10::GatheredContext> context;
};

struct BlockInfo {
  size_t size = 0;
  size_t requested_size = 0;
  bool allocated = false;
  bool active = false; // allocated, or freed but still used by other streams
  std::shared_ptr<c10::GatheredContext> context_when_allocated;
};

struct SegmentInfo {
  c10::DeviceIndex device = 0;
  uintptr_t address = 0;
  aclrtStream stream = nullptr;
  size_t total_size = 0;
  size_t requested_size = 0;
  size_t allocated_size = 0;
  size_t active_size = 0;
  bool is_large = false;
  bool is_expandable = false; // Note [Expandable segments]
  c10::MempoolId_t owner_private_pool_id = {0, 0};
  std::vector<BlockInfo> blocks;
  std::shared_ptr<c10::GatheredContext> context_when_allocated;
};

struct SnapshotInfo {
  std::vector<SegmentInfo> segments;
  std::vector<std::vector<TraceEntry>> device_traces; // per device
};

// Starts (or stops, clearing the trace) recording: each allocation's stack
// from `context_recorder` as `when` says, and the last `max_entries`
// allocator events per device.
TORCH_NPU_API void recordHistory(
    bool enabled, CreateContextFn context_recorder, size_t max_entries, RecordContext when);
TORCH_NPU_API SnapshotInfo snapshot();

// Called before an allocation raises torch.OutOfMemoryError (without the
// allocator's lock held): (device, requested bytes, device free, total).
using OutOfMemoryObserver = std::function<void(c10::DeviceIndex, size_t, size_t, size_t)>;
TORCH_NPU_API void attachOutOfMemoryObserver(OutOfMemoryObserver observer);

} // namespace c10_npu::NPUCachingAllocator
