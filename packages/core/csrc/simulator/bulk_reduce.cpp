#include "bulk_reduce.h"

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <vector>

#include "bulk_copy.h"
#include "collective_reduce.h"
#include "util.h"

#if defined(__x86_64__)
// GCC 12 warns inside its own AVX-512 intrinsics, whose unmasked forms
// pass an undefined vector (_mm512_undefined_*) as the masked-off source.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

namespace npu_sim {

// Note [Bulk reductions bypass the cache]
// A direct reduce-scatter whose output on a rank reaches kBypassCacheBytes
// combines its piece of every rank's input in one pass that reads each
// input where it is (this rank's, and the peers' through their mapped
// heaps) and writes each output line once, with a non-temporal store of
// the line combined in a register: no read for ownership of an output
// that does not fit the cache, and the inputs stream four pages at once as
// a bulk copy's source does (Note [Bulk copies bypass the cache],
// bulk_copy.cpp). The usual reduction (reduceFrom, collective_comm.cpp)
// writes the output with plain stores, 128 KiB chunks at a time; sending
// its chunks to the output with non-temporal stores from an accumulator
// in the cache cost more than it saved (a copy more per chunk).
// Measured on the 2-CPU development VM (loaded; two processes at once,
// each reading the other's memfd through a read-only mapping, as the
// ranks do), a 2-rank 256 MiB float32 sum: the rank's CPU time per call
// went from 31 to 22 ms (64 MiB: 9 to 7 ms), and the pass took 0.75-0.85
// of the time of a memcpy of the 256 MiB where the usual reduction took
// 1.0-1.1 of it. Below kBypassCacheBytes the output stays in the cache for
// its next reader, and the one-pass kernel measured no faster.
//
// The pass has AVX-512 only (useAvx512(), bulk_copy.h), and covers the
// types and ops whose vector instructions give, lane for lane, the bits of
// the scalar reduction (collective_reduce.cpp), combining in rank order as
// it does: 32- and 64-bit floats and integers, every op but 64-bit integer
// products (AVX-512DQ). 8- and 16-bit types (16-bit floats round to their
// type at every step), those products, CPUs or settings without AVX-512,
// and peers read across memory rather than through a mapping reduce as
// usual, into the same bits.
namespace {

#if defined(__x86_64__)
constexpr size_t kStreamGroup = kStreams * kStreamPage;

// The lane-wise operations, as (accumulated x, next input y): each gives
// the bits the scalar reduction (collective_reduce.cpp) gives for every
// lane. Integer sums and products wrap there as here. Where both x and y
// are NaNs, x86 returns the NaN of an instruction's first source, and GCC
// compiles the scalar x + y and x * y with y first: so y is first here
// too, pinned in assembly (a test compares the bits of both paths on
// random bits, NaNs included, and would see the compiler change that).
// std::max(x, y) is `x < y ? y : x` and vmaxps(a, b) is `a > b ? a : b`:
// so max(x, y) is vmaxps(y, x), which returns x for a NaN on either side as
// std::max does, and x for zeros of either sign; likewise for min.
#define NPU_SIM_AVX512 __attribute__((target("avx512f"), always_inline)) static inline

// `a (op) b` with `a` as the instruction's first source, whose NaN it
// returns when both are NaNs. Written out because the compiler takes
// vaddps and vmulps for commutative and swaps their intrinsics' operands.
struct Vaddps {
  NPU_SIM_AVX512 __m512i run(__m512i a, __m512i b) {
    __m512i r;
    asm("vaddps %[b], %[a], %[r]" : [r] "=v"(r) : [a] "v"(a), [b] "v"(b));
    return r;
  }
};
struct Vmulps {
  NPU_SIM_AVX512 __m512i run(__m512i a, __m512i b) {
    __m512i r;
    asm("vmulps %[b], %[a], %[r]" : [r] "=v"(r) : [a] "v"(a), [b] "v"(b));
    return r;
  }
};
struct Vaddpd {
  NPU_SIM_AVX512 __m512i run(__m512i a, __m512i b) {
    __m512i r;
    asm("vaddpd %[b], %[a], %[r]" : [r] "=v"(r) : [a] "v"(a), [b] "v"(b));
    return r;
  }
};
struct Vmulpd {
  NPU_SIM_AVX512 __m512i run(__m512i a, __m512i b) {
    __m512i r;
    asm("vmulpd %[b], %[a], %[r]" : [r] "=v"(r) : [a] "v"(a), [b] "v"(b));
    return r;
  }
};
template <typename Instruction>
NPU_SIM_AVX512 __m512i firstSource(__m512i a, __m512i b) {
  return Instruction::run(a, b);
}

struct SumF32 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) {
    return firstSource<Vaddps>(y, x);
  }
};
struct ProdF32 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) {
    return firstSource<Vmulps>(y, x);
  }
};
struct MaxF32 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) {
    return _mm512_castps_si512(_mm512_max_ps(_mm512_castsi512_ps(y), _mm512_castsi512_ps(x)));
  }
};
struct MinF32 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) {
    return _mm512_castps_si512(_mm512_min_ps(_mm512_castsi512_ps(y), _mm512_castsi512_ps(x)));
  }
};
struct SumF64 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) {
    return firstSource<Vaddpd>(y, x);
  }
};
struct ProdF64 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) {
    return firstSource<Vmulpd>(y, x);
  }
};
struct MaxF64 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) {
    return _mm512_castpd_si512(_mm512_max_pd(_mm512_castsi512_pd(y), _mm512_castsi512_pd(x)));
  }
};
struct MinF64 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) {
    return _mm512_castpd_si512(_mm512_min_pd(_mm512_castsi512_pd(y), _mm512_castsi512_pd(x)));
  }
};
struct SumI32 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) { return _mm512_add_epi32(x, y); }
};
struct ProdI32 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) { return _mm512_mullo_epi32(x, y); }
};
struct MaxI32 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) { return _mm512_max_epi32(x, y); }
};
struct MinI32 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) { return _mm512_min_epi32(x, y); }
};
struct MaxU32 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) { return _mm512_max_epu32(x, y); }
};
struct MinU32 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) { return _mm512_min_epu32(x, y); }
};
struct SumI64 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) { return _mm512_add_epi64(x, y); }
};
struct MaxI64 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) { return _mm512_max_epi64(x, y); }
};
struct MinI64 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) { return _mm512_min_epi64(x, y); }
};
struct MaxU64 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) { return _mm512_max_epu64(x, y); }
};
struct MinU64 {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) { return _mm512_min_epu64(x, y); }
};
#undef NPU_SIM_AVX512

// The line at byte `at` of every input, combined in input order, into
// `out + at` with one non-temporal store. Two inputs, the common case, go
// without the loop.
template <typename Op>
__attribute__((target("avx512f"), always_inline)) inline void reduceLine(
    char* out, const char* const* in, size_t n, size_t at) {
  __m512i acc = Op::apply(_mm512_loadu_si512(in[0] + at), _mm512_loadu_si512(in[1] + at));
  for (size_t r = 2; r < n; ++r) {
    acc = Op::apply(acc, _mm512_loadu_si512(in[r] + at));
  }
  _mm512_stream_si512(reinterpret_cast<__m512i*>(out + at), acc);
}

// `bytes` (whole lines; `out` line-aligned) from byte 0 of every input: the
// body kStreams pages at a time, a line of each in turn, as copies go
// (Note [Bulk copies bypass the cache]), then the lines after the last
// such group one by one.
template <typename Op>
__attribute__((target("avx512f"))) void reduceLines(char* out, const char* const* in, size_t n,
                                                    size_t bytes) {
  size_t group = 0;
  for (; group + kStreamGroup <= bytes; group += kStreamGroup) {
    for (size_t line = 0; line < kStreamPage; line += kCacheLine) {
      for (size_t page = 0; page < kStreamGroup; page += kStreamPage) {
        reduceLine<Op>(out, in, n, group + page + line);
      }
    }
  }
  for (size_t at = group; at < bytes; at += kCacheLine) {
    reduceLine<Op>(out, in, n, at);
  }
}

using LinesFn = void (*)(char*, const char* const*, size_t, size_t);

// The pass for `type` and `op`, or null: 8- and 16-bit elements (16-bit
// floats round at every step) and 64-bit integer products (AVX-512DQ)
// reduce as usual.
LinesFn linesFor(HcclDataType type, HcclReduceOp op) {
  const bool sum = op == HCCL_REDUCE_SUM;
  const bool prod = op == HCCL_REDUCE_PROD;
  const bool max = op == HCCL_REDUCE_MAX;
  const bool min = op == HCCL_REDUCE_MIN;
  switch (type) {
    case HCCL_DATA_TYPE_FP32:
      return sum ? reduceLines<SumF32> : prod ? reduceLines<ProdF32>
          : max ? reduceLines<MaxF32> : min ? reduceLines<MinF32> : nullptr;
    case HCCL_DATA_TYPE_FP64:
      return sum ? reduceLines<SumF64> : prod ? reduceLines<ProdF64>
          : max ? reduceLines<MaxF64> : min ? reduceLines<MinF64> : nullptr;
    case HCCL_DATA_TYPE_INT32:
      return sum ? reduceLines<SumI32> : prod ? reduceLines<ProdI32>
          : max ? reduceLines<MaxI32> : min ? reduceLines<MinI32> : nullptr;
    case HCCL_DATA_TYPE_UINT32:
      return sum ? reduceLines<SumI32> : prod ? reduceLines<ProdI32>
          : max ? reduceLines<MaxU32> : min ? reduceLines<MinU32> : nullptr;
    case HCCL_DATA_TYPE_INT64:
      return sum ? reduceLines<SumI64> : max ? reduceLines<MaxI64>
          : min ? reduceLines<MinI64> : nullptr;
    case HCCL_DATA_TYPE_UINT64:
      return sum ? reduceLines<SumI64> : max ? reduceLines<MaxU64>
          : min ? reduceLines<MinU64> : nullptr;
    default:
      return nullptr;
  }
}

// The scalar reduction of `count` elements at element `at` of every input
// into `out + at`, through a buffer: `out` may be any one input.
void reduceSmall(char* out, const char* const* in, size_t n, size_t at, size_t count,
                 size_t esize, HcclDataType type, HcclReduceOp op) {
  alignas(kCacheLine) char acc[kCacheLine];
  reduceTo(acc, in[0] + at * esize, in[1] + at * esize, count, type, op);
  for (size_t r = 2; r < n; ++r) {
    reduceInto(acc, in[r] + at * esize, count, type, op);
  }
  std::memcpy(out + at * esize, acc, count * esize);
}
#endif

} // namespace

bool reduceBypassingCache(void* out_raw, const char* const* inputs, size_t n, size_t count,
                          HcclDataType type, HcclReduceOp op) {
#if defined(__x86_64__)
  const size_t esize = hcclElementSize(type);
  const LinesFn lines = useAvx512() ? linesFor(type, op) : nullptr;
  auto* out = static_cast<char*>(out_raw);
  const size_t head_bytes = (kCacheLine - reinterpret_cast<uintptr_t>(out) % kCacheLine) %
      kCacheLine;
  if (lines == nullptr || n < 2 || head_bytes % esize != 0 || count * esize < kStreamGroup) {
    return false;
  }
  // Whole output lines in one pass; the elements before the first one and
  // after the last one as reduceTo does them.
  const size_t head = head_bytes / esize;
  const size_t body = (count - head) * esize / kCacheLine * kCacheLine;
  const size_t tail = head + body / esize;
  std::vector<const char*> body_inputs(n);
  for (size_t r = 0; r < n; ++r) {
    body_inputs[r] = inputs[r] + head_bytes;
  }
  if (head > 0) {
    reduceSmall(out, inputs, n, 0, head, esize, type, op);
  }
  lines(out + head_bytes, body_inputs.data(), n, body);
  // Non-temporal stores are not ordered with later stores: fence them
  // before anything (a meeting) tells a peer that the output is written.
  _mm_sfence();
  for (size_t at = tail; at < count; at += kCacheLine / esize) {
    reduceSmall(out, inputs, n, at, std::min(kCacheLine / esize, count - at), esize, type, op);
  }
  return true;
#endif
  return false;
}

} // namespace npu_sim
