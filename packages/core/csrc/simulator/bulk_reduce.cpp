#include "bulk_reduce.h"

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <vector>

#include "bulk_copy.h"
#include "collective_reduce.h"
#include "reduce_lanes.h"
#include "util.h"


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
// each reading the other's memfd through a mapping, as the
// ranks do), a 2-rank 256 MiB float32 sum: the rank's CPU time per call
// went from 31 to 22 ms (64 MiB: 9 to 7 ms), and the pass took 0.75-0.85
// of the time of a memcpy of the 256 MiB where the usual reduction took
// 1.0-1.1 of it. Below kBypassCacheBytes the output stays in the cache for
// its next reader, and the one-pass kernel measured no faster.
//
// The pass has AVX-512 only (useAvx512(), bulk_copy.h), and covers the
// types and ops whose vector instructions give, lane for lane, the bits of
// the scalar reduction (collective_reduce.cpp), combining in rank order as
// it does (reduce_lanes.h): 16-, 32- and 64-bit floats and 32- and 64-bit
// integers, every op but 64-bit integer products (AVX-512DQ). 8- and
// 16-bit integers, those products, CPUs or settings without AVX-512, and
// peers read across memory rather than through a mapping reduce as usual,
// into the same bits.
namespace {

#if defined(__x86_64__)
using namespace lanes;

// The line at byte `at` of every input, combined in input order, into
// `out[o] + at` for every output with one non-temporal store each. Two
// inputs, the common case, go without the loop.
template <typename Op>
__attribute__((target("avx512f"), always_inline)) inline void reduceLine(
    char* const* out, size_t n_out, const char* const* in, size_t n, size_t at) {
  __m512i acc = Op::apply(_mm512_loadu_si512(in[0] + at), _mm512_loadu_si512(in[1] + at));
  for (size_t r = 2; r < n; ++r) {
    acc = Op::apply(acc, _mm512_loadu_si512(in[r] + at));
  }
  for (size_t o = 0; o < n_out; ++o) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(out[o] + at), acc);
  }
}

// `bytes` (whole lines; every output line-aligned) from byte 0 of every
// input: the body streamedPages() pages at a time, a line of each in turn,
// as copies go (Note [Bulk copies bypass the cache], Note [Page streams
// follow the CPU]), then the lines after the last such group one by one.
template <typename Op>
__attribute__((target("avx512f"))) void reduceLines(char* const* out, size_t n_out,
                                                    const char* const* in, size_t n,
                                                    size_t bytes) {
  const size_t group_bytes = streamedPages() * kStreamPage;
  size_t group = 0;
  for (; group + group_bytes <= bytes; group += group_bytes) {
    for (size_t line = 0; line < kStreamPage; line += kCacheLine) {
      for (size_t page = 0; page < group_bytes; page += kStreamPage) {
        reduceLine<Op>(out, n_out, in, n, group + page + line);
      }
    }
  }
  for (size_t at = group; at < bytes; at += kCacheLine) {
    reduceLine<Op>(out, n_out, in, n, at);
  }
}

using LinesFn = void (*)(char* const*, size_t, const char* const*, size_t, size_t);

// The pass for `type` and `op`, or null: 8- and 16-bit integers and 64-bit
// integer products (AVX-512DQ) reduce as usual.
LinesFn linesFor(HcclDataType type, HcclReduceOp op) {
  const bool sum = op == HCCL_REDUCE_SUM;
  const bool prod = op == HCCL_REDUCE_PROD;
  const bool max = op == HCCL_REDUCE_MAX;
  const bool min = op == HCCL_REDUCE_MIN;
  switch (type) {
    case HCCL_DATA_TYPE_FP16:
      return sum ? reduceLines<Rounded<SumF32, Fp16>> : prod ? reduceLines<Rounded<ProdF32, Fp16>>
          : max ? reduceLines<Rounded<MaxF32, Fp16>> : min ? reduceLines<Rounded<MinF32, Fp16>>
          : nullptr;
    case HCCL_DATA_TYPE_BFP16:
      return sum ? reduceLines<Rounded<SumF32, Bf16>> : prod ? reduceLines<Rounded<ProdF32, Bf16>>
          : max ? reduceLines<Rounded<MaxF32, Bf16>> : min ? reduceLines<Rounded<MinF32, Bf16>>
          : nullptr;
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
// into `out[o] + at` for every output, through a buffer: an output may be
// any one input.
void reduceSmall(char* const* out, size_t n_out, const char* const* in, size_t n, size_t at,
                 size_t count, size_t esize, HcclDataType type, HcclReduceOp op) {
  alignas(kCacheLine) char acc[kCacheLine];
  reduceTo(acc, in[0] + at * esize, in[1] + at * esize, count, type, op);
  for (size_t r = 2; r < n; ++r) {
    reduceInto(acc, in[r] + at * esize, count, type, op);
  }
  for (size_t o = 0; o < n_out; ++o) {
    std::memcpy(out[o] + at * esize, acc, count * esize);
  }
}
#endif

} // namespace

bool reduceBypassingCache(void* out, const char* const* inputs, size_t n, size_t count,
                          HcclDataType type, HcclReduceOp op) {
  return reduceToEachBypassingCache(&out, 1, inputs, n, count, type, op);
}

bool reduceToEachBypassingCache(void* const* outputs, size_t n_out, const char* const* inputs,
                                size_t n, size_t count, HcclDataType type, HcclReduceOp op) {
#if defined(__x86_64__)
  const size_t esize = hcclElementSize(type);
  const LinesFn lines = useAvx512() ? linesFor(type, op) : nullptr;
  if (lines == nullptr || n < 2 || n_out < 1 || count * esize < kStreamPage) {
    return false;
  }
  // Every output's lines start at the same element: the stores of a line
  // go to all outputs at once.
  const auto misalignment = [](const void* p) {
    return reinterpret_cast<uintptr_t>(p) % kCacheLine;
  };
  std::vector<char*> out(n_out);
  for (size_t o = 0; o < n_out; ++o) {
    out[o] = static_cast<char*>(outputs[o]);
    if (misalignment(out[o]) != misalignment(out[0])) {
      return false;
    }
  }
  const size_t head_bytes = (kCacheLine - misalignment(out[0])) % kCacheLine;
  if (head_bytes % esize != 0) {
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
  std::vector<char*> body_out(n_out);
  for (size_t o = 0; o < n_out; ++o) {
    body_out[o] = out[o] + head_bytes;
  }
  if (head > 0) {
    reduceSmall(out.data(), n_out, inputs, n, 0, head, esize, type, op);
  }
  lines(body_out.data(), n_out, body_inputs.data(), n, body);
  // Non-temporal stores are not ordered with later stores: fence them
  // before anything (a meeting) tells a peer that the output is written.
  _mm_sfence();
  for (size_t at = tail; at < count; at += kCacheLine / esize) {
    reduceSmall(out.data(), n_out, inputs, n, at, std::min(kCacheLine / esize, count - at),
                esize, type, op);
  }
  return true;
#endif
  return false;
}

} // namespace npu_sim
