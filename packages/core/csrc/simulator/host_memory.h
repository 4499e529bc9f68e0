// aclrtMallocHost / aclrtFreeHost: page-aligned host memory whose ranges
// are tracked so that aclrtPointerGetAttributes can say "pinned host".
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>

#include "acl_types.h"

namespace npu_sim {

class HostMemory {
 public:
  aclError allocate(void** ptr, size_t size);
  aclError free(void* ptr);
  // True when p lies inside a live aclrtMallocHost allocation.
  bool contains(uintptr_t p) const;

 private:
  struct Block {
    size_t size;
    bool mapped; // mmap'ed (large) rather than from the C heap
  };
  mutable std::shared_mutex mutex_;
  std::map<uintptr_t, Block> blocks_;
};

} // namespace npu_sim
