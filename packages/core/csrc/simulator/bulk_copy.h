// Copies whose destination is too large to stay in the cache (Note [Bulk
// copies bypass the cache], bulk_copy.cpp).
#pragma once

#include <cstddef>

namespace npu_sim {

// A collective whose output on this rank has at least this many bytes
// writes it with copyBypassingCache.
constexpr size_t kBypassCacheBytes = 16 << 20;

// A copy around the cache goes a line (kCacheLine, util.h) at a time,
// streamedPages() pages of the source (and of the destination) at once,
// a line of each in turn (Note [Bulk copies bypass the cache]); so does a
// reduction (Note [Bulk reductions bypass the cache], bulk_reduce.cpp).
constexpr size_t kStreamPage = 4096;
size_t streamedPages();

// memcpy(dst, src, bytes) for ranges that do not overlap, writing `dst`
// with non-temporal stores; the stores are fenced before it returns, so a
// release store after it publishes them like a memcpy's.
void copyBypassingCache(void* dst, const void* src, size_t bytes);

#if defined(__x86_64__)
// Whether host code may write lines with one 64-byte AVX-512 store: the
// CPU and the kernel support it and ATEN_CPU_CAPABILITY does not cap the
// vector width (Config::wide_vectors).
bool useAvx512();
#endif

} // namespace npu_sim
