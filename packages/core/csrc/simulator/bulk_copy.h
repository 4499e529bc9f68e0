// Copies whose destination is too large to stay in the cache (Note [Bulk
// copies bypass the cache], bulk_copy.cpp).
#pragma once

#include <cstddef>

namespace npu_sim {

// A collective whose output on this rank has at least this many bytes
// writes it with copyBypassingCache.
constexpr size_t kBypassCacheBytes = 16 << 20;

// memcpy(dst, src, bytes) for ranges that do not overlap, writing `dst`
// with non-temporal stores; the stores are fenced before it returns, so a
// release store after it publishes them like a memcpy's.
void copyBypassingCache(void* dst, const void* src, size_t bytes);

} // namespace npu_sim
