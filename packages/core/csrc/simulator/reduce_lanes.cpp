#include "reduce_lanes.h"

#include "bulk_copy.h"
#include "util.h"

namespace npu_sim {

// Note [16-bit float reductions in lanes]
// The scalar reduction (collective_reduce.cpp) combines float16 and
// bfloat16 in float32 and rounds to the type after every step. Compiled
// for any x86-64, its float16 conversions are calls into libgcc: a 2-rank
// 64 MiB float16 all-reduce took 281 ms of CPU per rank where float32
// took 19 (bfloat16, converted inline: 66), on the 2-CPU development VM
// under load. With AVX-512, 32 values at a time are widened to float32
// (vcvtph2ps; bfloat16 by a shift), combined by the float32 lane
// operations (reduce_lanes.h: the scalar order, so the same NaN), and
// rounded back to nearest-even (vcvtps2ph; bfloat16 as the scalar narrow()
// does, NaNs quiet with their sign and top payload bits). Same bits as
// the scalar reduction, which a test compares on random bits, NaNs
// included. Used by every reduction of these types (reduceTo, reduceInto)
// and by the one-pass bulk reductions (bulk_reduce.cpp).
namespace {

#if defined(__x86_64__)
using namespace lanes;

template <typename Op>
__attribute__((target("avx512f"))) void reduceVectors(char* out, const char* a, const char* b,
                                                      size_t vectors) {
  for (size_t at = 0; at < vectors * kCacheLine; at += kCacheLine) {
    _mm512_storeu_si512(out + at,
                        Op::apply(_mm512_loadu_si512(a + at), _mm512_loadu_si512(b + at)));
  }
}

using VectorsFn = void (*)(char*, const char*, const char*, size_t);

template <typename Half>
VectorsFn vectorsFor(HcclReduceOp op) {
  switch (op) {
    case HCCL_REDUCE_SUM: return reduceVectors<Rounded<SumF32, Half>>;
    case HCCL_REDUCE_PROD: return reduceVectors<Rounded<ProdF32, Half>>;
    case HCCL_REDUCE_MAX: return reduceVectors<Rounded<MaxF32, Half>>;
    case HCCL_REDUCE_MIN: return reduceVectors<Rounded<MinF32, Half>>;
    default: return nullptr;
  }
}
#endif

} // namespace

size_t reduceToInLanes(void* out, const void* a, const void* b, size_t count, HcclDataType type,
                       HcclReduceOp op) {
#if defined(__x86_64__)
  constexpr size_t kPerVector = kCacheLine / 2; // 16-bit values in 64 bytes
  if (count < kPerVector || !useAvx512()) {
    return 0;
  }
  const VectorsFn vectors = type == HCCL_DATA_TYPE_FP16 ? vectorsFor<Fp16>(op)
      : type == HCCL_DATA_TYPE_BFP16                    ? vectorsFor<Bf16>(op)
                                                        : nullptr;
  if (vectors == nullptr) {
    return 0;
  }
  const size_t n = count / kPerVector;
  vectors(static_cast<char*>(out), static_cast<const char*>(a), static_cast<const char*>(b), n);
  return n * kPerVector;
#else
  (void)out, (void)a, (void)b, (void)count, (void)type, (void)op;
  return 0;
#endif
}

} // namespace npu_sim
