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
