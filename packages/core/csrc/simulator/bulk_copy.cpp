#include "bulk_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace npu_sim {

// Note [Bulk copies bypass the cache]
// A plain store to a line that is not in the cache first reads the line
// from memory (read for ownership), so a copy into a cold destination
// moves three bytes per byte copied; non-temporal stores write whole lines
// without reading them, two. glibc's memcpy switches to them only above
// glibc.cpu.x86_non_temporal_threshold, 3/4 of the last-level cache it is
// told of (181.5 MiB on the 2-CPU development VM, which reports a 480 MiB
// L3 that copies do not behave as having): the simulated HCCL's direct
// collectives copy their output in pieces (a peer's share, one rank's
// block), each below that, while a device copy of the whole tensor is
// above it. Measured there (one thread, buffers of the shared device
// heap, CPU time): two 128 MiB copies took 39 ms against 25 ms for one
// 256 MiB copy; with non-temporal stores the two took 23 ms. At 32 and
// 64 MiB they halved a copy's time, at 16 MiB they made no difference, and
// below that the destination stays in the cache, where a later reader
// finds it. So a direct collective whose output on a rank reaches
// kBypassCacheBytes copies into it with these stores (all-gather,
// all-to-all, broadcast, an all-reduce's gather phase). A reduction's
// chunks stay plain stores from the accumulator: with these stores a 256
// MiB reduce-scatter took 5% more CPU time, not less. They change no
// byte: the results stay those of the staging path.
void copyBypassingCache(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  constexpr size_t kLine = 64;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (bytes < 4 * kLine) {
    std::memcpy(d, s, bytes);
    return;
  }
  // Whole destination lines only: the head up to the first one and the
  // tail after the last one are plain copies.
  const size_t head = (kLine - reinterpret_cast<uintptr_t>(d) % kLine) % kLine;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const size_t body = bytes - bytes % kLine;
  for (size_t i = 0; i < body; i += kLine) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  // Non-temporal stores are not ordered with later stores: fence them
  // before anything (a meeting) tells a peer that the output is written.
  _mm_sfence();
  std::memcpy(d + body, s + body, bytes - body);
#else
  std::memcpy(dst, src, bytes);
#endif
}

} // namespace npu_sim
