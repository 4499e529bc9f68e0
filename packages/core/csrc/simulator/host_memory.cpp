#include "host_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <mutex>

#include "errors.h"
#include "util.h"

namespace npu_sim {
namespace {

// Large blocks come straight from mmap so that freeing them returns the
// memory to the system at once; small ones from the C heap, which is
// faster for the many small blocks a caching host allocator may ask for.
constexpr size_t kMmapThreshold = 1 * kMiB;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 // Linux 5.14
#endif

// Pinned memory is resident from allocation on, as on CANN. Otherwise the
// first copy into a new buffer takes a page fault per (huge) page and zeroes
// it inside the stream's memcpy: a first device-to-host copy of 64 MiB ran
// 25-35% slower than the next ones, and more when the kernel had to compact
// memory for huge pages. Populating after MADV_HUGEPAGE keeps huge pages.
void populate(void* p, size_t size) {
  if (madvise(p, size, MADV_POPULATE_WRITE) == 0) {
    return;
  }
  // Older kernels: touch one byte per page (the memory is zero).
  auto* bytes = static_cast<volatile unsigned char*>(p);
  for (size_t offset = 0; offset < size; offset += kPageSize) {
    bytes[offset] = 0;
  }
}

} // namespace

aclError HostMemory::allocate(void** ptr, size_t size) {
  if (ptr == nullptr || size == 0) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: %s",
                ptr == nullptr ? "hostPtr is null" : "size is 0");
  }
  void* p = nullptr;
  const bool mapped = size >= kMmapThreshold;
  if (mapped) {
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      p = nullptr;
    } else {
      madvise(p, size, MADV_HUGEPAGE); // copies at host memcpy speed
      populate(p, size);
    }
  } else if (posix_memalign(&p, kPageSize, size) != 0) {
    p = nullptr;
  }
  if (p == nullptr) {
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                "aclrtMallocHost: out of host memory: tried to allocate %s",
                formatBytes(size).c_str());
  }
  {
    std::unique_lock lock(mutex_);
    blocks_.emplace(reinterpret_cast<uintptr_t>(p), Block{size, mapped});
  }
  *ptr = p;
  return ACL_SUCCESS;
}

aclError HostMemory::free(void* ptr) {
  Block block{};
  {
    std::unique_lock lock(mutex_);
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == blocks_.end()) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtFreeHost: %p is not a live allocation of aclrtMallocHost (freed "
                  "already, or not its start)",
                  ptr);
    }
    block = it->second;
    blocks_.erase(it);
  }
  if (block.mapped) {
    munmap(ptr, block.size);
  } else {
    std::free(ptr);
  }
  return ACL_SUCCESS;
}

bool HostMemory::contains(uintptr_t p) const {
  std::shared_lock lock(mutex_);
  auto it = blocks_.upper_bound(p);
  if (it == blocks_.begin()) {
    return false;
  }
  --it;
  return p - it->first < it->second.size;
}

} // namespace npu_sim
