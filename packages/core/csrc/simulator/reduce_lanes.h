// Lane-wise AVX-512 reductions that give, lane for lane, the bits of the
// simulated HCCL's scalar reduction (collective_reduce.cpp): the one-pass
// bulk reductions (bulk_reduce.cpp) and the 16-bit float reductions
// (reduce_lanes.cpp) combine with them.
#pragma once

#include <cstddef>

#include "hccl_types.h"

#if defined(__x86_64__)
// GCC 12 warns inside its own AVX-512 intrinsics, whose unmasked forms
// pass an undefined vector (_mm512_undefined_*) as the masked-off source.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

namespace npu_sim {

// out[i] = a[i] (op) b[i] as reduceTo (collective_reduce.h) does, for the
// leading elements it can do with AVX-512 lanes: float16 and bfloat16
// (Note [16-bit float reductions in lanes], reduce_lanes.cpp). Returns how
// many elements it did (a multiple of 32; 0 for other types, or without
// AVX-512): the caller does the rest.
size_t reduceToInLanes(void* out, const void* a, const void* b, size_t count, HcclDataType type,
                       HcclReduceOp op);

#if defined(__x86_64__)
namespace lanes {

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
// Note [16-bit float reductions in lanes]: 32 float16 or bfloat16 values
// per vector, widened to float32, combined with Op, and rounded back to
// their type, as the scalar reduction rounds at every step.
struct Fp16 {
  NPU_SIM_AVX512 __m512i widen(__m256i h) { return _mm512_castps_si512(_mm512_cvtph_ps(h)); }
  NPU_SIM_AVX512 __m256i narrow(__m512i f) {
    return _mm512_cvtps_ph(_mm512_castsi512_ps(f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
};
struct Bf16 {
  NPU_SIM_AVX512 __m512i widen(__m256i h) {
    return _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
  }
  // To nearest, ties to even; a NaN keeps its sign and top payload bits and
  // becomes quiet (collective_reduce.cpp's narrow()).
  NPU_SIM_AVX512 __m256i narrow(__m512i u) {
    const __m512i magnitude = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
    const __m512i high = _mm512_srli_epi32(u, 16);
    const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                          _mm512_and_si512(high, _mm512_set1_epi32(1)));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    const __m512i quiet = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
  }
};
template <typename Op, typename Half>
struct Rounded {
  NPU_SIM_AVX512 __m512i apply(__m512i x, __m512i y) {
    const __m256i low = Half::narrow(Op::apply(Half::widen(_mm512_castsi512_si256(x)),
                                               Half::widen(_mm512_castsi512_si256(y))));
    const __m256i high = Half::narrow(Op::apply(Half::widen(_mm512_extracti64x4_epi64(x, 1)),
                                                Half::widen(_mm512_extracti64x4_epi64(y, 1))));
    return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
  }
};
#undef NPU_SIM_AVX512

} // namespace lanes
#endif

} // namespace npu_sim
