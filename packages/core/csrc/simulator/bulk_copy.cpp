#include "bulk_copy.h"

#include <cstdint>
#include <cstring>

#include "config.h"
#include "util.h"

#if defined(__x86_64__)
#include <immintrin.h>
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
// MiB reduce-scatter took 5% more CPU time, not less (a large
// reduce-scatter combines in one pass instead: Note [Bulk reductions
// bypass the cache], bulk_reduce.cpp). They change no
// byte: the results stay those of the staging path.
//
// How the stores go matters as much. Copying one line after the other with
// 16-byte stores, a two-rank 256 MiB all-to-all (each rank copying two 128
// MiB pieces, both ranks at once) spent 33.5 ms in its copies where glibc
// copied the 256 MiB in 27.6 ms, and missed its bandwidth target. Two
// changes brought the copies to 24.5 ms (64 MiB: 8.3 -> 6.1 ms; a
// throwaway two-process benchmark over memfd mappings, as the ranks read):
//  - the copy streams four pages at once, a line of each in turn: the
//    CPU's prefetchers follow a stream only within a 4 KiB page, so one
//    sequential stream stalls at every page boundary while four keep four
//    pages in flight (two pages: 27.7 ms; eight: no better than four;
//    software prefetches added nothing);
//  - with AVX-512 one 64-byte store writes a whole line, where four 16-byte
//    stores fill a write-combining buffer piecewise (four pages with 16- or
//    32-byte stores: 27.1 ms).
// The AVX-512 code runs where the CPU and the kernel support it and
// ATEN_CPU_CAPABILITY does not cap the vector width (Config::wide_vectors);
// elsewhere the same order with SSE2 stores, which every x86-64 has.
//
// Note [Page streams follow the CPU]
// The four pages at once were measured on an Intel VM. On the AMD EPYC VM
// (Zen, 32 MiB L3) the same code ran slower than one sequential stream:
// a throwaway one-thread benchmark over shared anonymous memory (the
// device heap's kind), 128 MiB, minimum of 8 (2 CPUs, loaded): a copy 14.0
// ms with four pages, 8.6 with one page (glibc's memcpy 18.6); a 2-input
// float32 sum 27.9 against 19.0 ms; at 64 MiB the same order in three
// runs. AMD's prefetchers follow a stream across pages. So streamedPages()
// is 1 on AMD CPUs and 4 elsewhere; both orders write the same bytes, and
// NPU_SIM_STREAM_PAGES sets it (tests take both orders on any CPU).
namespace {

#if defined(__x86_64__)
constexpr size_t kLine = kCacheLine;

// Copies `lines` whole lines from `s` to the line-aligned `d`, the 64
// bytes of each with one non-temporal store.
__attribute__((target("avx512f"))) void streamLinesAvx512(char* d, const char* s,
                                                          size_t lines) {
  for (size_t i = 0; i < lines * kLine; i += kLine) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), _mm512_loadu_si512(s + i));
  }
}

// The body of a copy, `group` (streamedPages() pages) bytes at a time:
// line k of each of the group's pages in turn, then line k + 1, so that
// every page is read and written as its own sequential stream.
__attribute__((target("avx512f"))) void streamGroupsAvx512(char* d, const char* s,
                                                           size_t groups, size_t group) {
  for (size_t g = 0; g < groups; ++g, d += group, s += group) {
    for (size_t line = 0; line < kStreamPage; line += kLine) {
      for (size_t page = 0; page < group; page += kStreamPage) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(d + page + line),
                            _mm512_loadu_si512(s + page + line));
      }
    }
  }
}

// The same with 16-byte stores (SSE2, which every x86-64 has): four of
// them fill a line's write-combining buffer.
void streamLinesSse2(char* d, const char* s, size_t lines) {
  for (size_t i = 0; i < lines * kLine; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  }
}

void streamGroupsSse2(char* d, const char* s, size_t groups, size_t group) {
  for (size_t g = 0; g < groups; ++g, d += group, s += group) {
    for (size_t line = 0; line < kStreamPage; line += kLine) {
      for (size_t page = 0; page < group; page += kStreamPage) {
        streamLinesSse2(d + page + line, s + page + line, 1);
      }
    }
  }
}

#endif

} // namespace

size_t streamedPages() {
#if defined(__x86_64__)
  // Note [Page streams follow the CPU].
  static const size_t pages = [] {
    if (config().stream_pages != 0) {
      return size_t{config().stream_pages};
    }
    __builtin_cpu_init();
    return __builtin_cpu_is("amd") ? size_t{1} : size_t{4};
  }();
  return pages;
#else
  return 1;
#endif
}

#if defined(__x86_64__)
bool useAvx512() {
  // libgcc's and compiler-rt's checks include the kernel's saving of the
  // registers.
  static const bool use = [] {
    __builtin_cpu_init(); // idempotent; needed if this ran before libgcc's constructor
    return config().wide_vectors && __builtin_cpu_supports("avx512f");
  }();
  return use;
}
#endif

void copyBypassingCache(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
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
  const size_t group = streamedPages() * kStreamPage;
  const size_t groups = bytes / group;
  const size_t lines = bytes % group / kLine;
  const size_t body = groups * group + lines * kLine;
  if (useAvx512()) {
    streamGroupsAvx512(d, s, groups, group);
    streamLinesAvx512(d + groups * group, s + groups * group, lines);
  } else {
    streamGroupsSse2(d, s, groups, group);
    streamLinesSse2(d + groups * group, s + groups * group, lines);
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
