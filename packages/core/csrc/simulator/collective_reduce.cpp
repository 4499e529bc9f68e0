#include "collective_reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "reduce_lanes.h"

namespace npu_sim {
namespace {

// Note [16-bit floats combine alike everywhere]
// float16 and bfloat16 combine in float32 and round to their type after
// every step, with conversions and NaN rules written out here rather than
// left to the compiler: GCC folds a float16 widened and narrowed again into
// the original bits (a signalling NaN stays signalling), and picks either
// operand's NaN for a sum of two NaNs depending on the code around it. The
// rules are the x86 vector instructions' (the AVX-512 lanes, Note [16-bit
// float reductions in lanes], reduce_lanes.cpp, give the same bits): a
// float16 NaN widens quiet (vcvtph2ps), a bfloat16 one as it is; a sum or
// product with a NaN operand is that NaN made quiet, the later rank's
// where both are NaNs (its operand is the instruction's first source);
// max and min are std::max and std::min; narrowing rounds to nearest even
// and makes a NaN quiet, keeping its sign and top payload bits.
struct Float16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

inline float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint32_t toBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float widen(Float16 v) {
  const uint32_t sign = static_cast<uint32_t>(v.bits & 0x8000u) << 16;
  const uint32_t exponent = (v.bits >> 10) & 0x1fu;
  const uint32_t mantissa = v.bits & 0x3ffu;
  if (exponent == 0x1f) { // infinity, or a NaN made quiet
    return fromBits(sign | 0x7f800000u | (mantissa != 0 ? 0x400000u | mantissa << 13 : 0u));
  }
  if (exponent == 0) { // zero or subnormal: mantissa * 2^-24, exact in float32
    return fromBits(sign | toBits(static_cast<float>(mantissa) * 0x1p-24f));
  }
  return fromBits(sign | (exponent + 112) << 23 | mantissa << 13);
}

inline Float16 narrowToFloat16(float f) {
  const uint32_t u = toBits(f);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {
    return Float16{static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu))};
  }
  if (magnitude >= 0x477ff000u) { // from half-way above 65504 on: infinity
    return Float16{static_cast<uint16_t>(sign | 0x7c00u)};
  }
  if (magnitude < 0x38800000u) { // below 2^-14: a subnormal (or zero) half
    // |f| * 2^24 is exact; nearbyint rounds to nearest even (the default
    // mode); 1024 is the smallest normal's bits.
    const float scaled = fromBits(magnitude) * 0x1p24f;
    return Float16{static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)))};
  }
  const uint32_t rebased = magnitude - 0x38000000u; // exponent 127 -> 15
  return Float16{static_cast<uint16_t>(sign | (rebased + 0xfffu + ((rebased >> 13) & 1u)) >> 13)};
}

// bfloat16 is the top half of a float32.
inline float widen(BFloat16 v) {
  return fromBits(static_cast<uint32_t>(v.bits) << 16);
}

inline BFloat16 narrow(float f) {
  uint32_t u = toBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return BFloat16{static_cast<uint16_t>((u >> 16) | 0x40u)}; // quiet NaN
  }
  u += 0x7fffu + ((u >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>(u >> 16)};
}

inline float quiet(float nan) {
  return fromBits(toBits(nan) | 0x400000u);
}

template <typename T>
struct Arithmetic {
  // Computes in T itself, except for the 16-bit floats (below).
  using Compute = T;
  static constexpr bool kRoundsTo16Bits = false;
  static Compute load(T v) { return v; }
  static T store(Compute v) { return v; }
};

template <>
struct Arithmetic<Float16> {
  using Compute = float;
  static constexpr bool kRoundsTo16Bits = true;
  static float load(Float16 v) { return widen(v); }
  static Float16 store(float v) { return narrowToFloat16(v); }
};

template <>
struct Arithmetic<BFloat16> {
  using Compute = float;
  static constexpr bool kRoundsTo16Bits = true;
  static float load(BFloat16 v) { return widen(v); }
  static BFloat16 store(float v) { return narrow(v); }
};

// x (op) y for a sum or product of 16-bit floats in float32, with the NaN
// rule of Note [16-bit floats combine alike everywhere].
template <typename Combine>
inline float withNaNRule(float x, float y, Combine f) {
  if (std::isnan(y)) {
    return quiet(y);
  }
  if (std::isnan(x)) {
    return quiet(x);
  }
  return f(x, y);
}

// out[i] = f(a[i], b[i]); `out` may be `a` (or `b`) itself, element for element.
template <typename T, typename Combine>
void combine(void* out_raw, const void* a_raw, const void* b_raw, size_t count, Combine f) {
  using A = Arithmetic<T>;
  auto* out = static_cast<T*>(out_raw);
  const auto* a = static_cast<const T*>(a_raw);
  const auto* b = static_cast<const T*>(b_raw);
  for (size_t i = 0; i < count; ++i) {
    out[i] = A::store(f(A::load(a[i]), A::load(b[i])));
  }
}

template <typename T>
void reduceTyped(void* out, const void* a, const void* b, size_t count, HcclReduceOp op) {
  using C = typename Arithmetic<T>::Compute;
  if constexpr (Arithmetic<T>::kRoundsTo16Bits) {
    if (op == HCCL_REDUCE_SUM) {
      return combine<T>(out, a, b, count, [](C x, C y) {
        return withNaNRule(x, y, [](C p, C q) { return static_cast<C>(p + q); });
      });
    }
    if (op == HCCL_REDUCE_PROD) {
      return combine<T>(out, a, b, count, [](C x, C y) {
        return withNaNRule(x, y, [](C p, C q) { return static_cast<C>(p * q); });
      });
    }
  }
  switch (op) {
    case HCCL_REDUCE_SUM:
      return combine<T>(out, a, b, count, [](C x, C y) { return static_cast<C>(x + y); });
    case HCCL_REDUCE_PROD:
      return combine<T>(out, a, b, count, [](C x, C y) { return static_cast<C>(x * y); });
    case HCCL_REDUCE_MAX:
      return combine<T>(out, a, b, count, [](C x, C y) { return std::max(x, y); });
    case HCCL_REDUCE_MIN:
      return combine<T>(out, a, b, count, [](C x, C y) { return std::min(x, y); });
    default:
      return;
  }
}

} // namespace

size_t hcclElementSize(HcclDataType type) {
  switch (type) {
    case HCCL_DATA_TYPE_INT8:
    case HCCL_DATA_TYPE_UINT8: return 1;
    case HCCL_DATA_TYPE_INT16:
    case HCCL_DATA_TYPE_UINT16:
    case HCCL_DATA_TYPE_FP16:
    case HCCL_DATA_TYPE_BFP16: return 2;
    case HCCL_DATA_TYPE_INT32:
    case HCCL_DATA_TYPE_UINT32:
    case HCCL_DATA_TYPE_FP32: return 4;
    case HCCL_DATA_TYPE_INT64:
    case HCCL_DATA_TYPE_UINT64:
    case HCCL_DATA_TYPE_FP64: return 8;
    default: return 0;
  }
}

const char* hcclDataTypeName(HcclDataType type) {
  switch (type) {
    case HCCL_DATA_TYPE_INT8: return "HCCL_DATA_TYPE_INT8";
    case HCCL_DATA_TYPE_INT16: return "HCCL_DATA_TYPE_INT16";
    case HCCL_DATA_TYPE_INT32: return "HCCL_DATA_TYPE_INT32";
    case HCCL_DATA_TYPE_FP16: return "HCCL_DATA_TYPE_FP16";
    case HCCL_DATA_TYPE_FP32: return "HCCL_DATA_TYPE_FP32";
    case HCCL_DATA_TYPE_INT64: return "HCCL_DATA_TYPE_INT64";
    case HCCL_DATA_TYPE_UINT64: return "HCCL_DATA_TYPE_UINT64";
    case HCCL_DATA_TYPE_UINT8: return "HCCL_DATA_TYPE_UINT8";
    case HCCL_DATA_TYPE_UINT16: return "HCCL_DATA_TYPE_UINT16";
    case HCCL_DATA_TYPE_UINT32: return "HCCL_DATA_TYPE_UINT32";
    case HCCL_DATA_TYPE_FP64: return "HCCL_DATA_TYPE_FP64";
    case HCCL_DATA_TYPE_BFP16: return "HCCL_DATA_TYPE_BFP16";
    case HCCL_DATA_TYPE_INT128: return "HCCL_DATA_TYPE_INT128";
    default: return "unknown HcclDataType";
  }
}

const char* hcclReduceOpName(HcclReduceOp op) {
  switch (op) {
    case HCCL_REDUCE_SUM: return "HCCL_REDUCE_SUM";
    case HCCL_REDUCE_PROD: return "HCCL_REDUCE_PROD";
    case HCCL_REDUCE_MAX: return "HCCL_REDUCE_MAX";
    case HCCL_REDUCE_MIN: return "HCCL_REDUCE_MIN";
    default: return "unknown HcclReduceOp";
  }
}

bool isValidReduceOp(HcclReduceOp op) {
  return op == HCCL_REDUCE_SUM || op == HCCL_REDUCE_PROD || op == HCCL_REDUCE_MAX ||
      op == HCCL_REDUCE_MIN;
}

void reduceTo(void* out, const void* a, const void* b, size_t count, HcclDataType type,
              HcclReduceOp op) {
  // Note [16-bit float reductions in lanes] (reduce_lanes.cpp).
  if (const size_t done = reduceToInLanes(out, a, b, count, type, op); done > 0) {
    const size_t at = done * hcclElementSize(type);
    out = static_cast<char*>(out) + at;
    a = static_cast<const char*>(a) + at;
    b = static_cast<const char*>(b) + at;
    count -= done;
  }
  switch (type) {
    case HCCL_DATA_TYPE_INT8: return reduceTyped<int8_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_UINT8: return reduceTyped<uint8_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_INT16: return reduceTyped<int16_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_UINT16: return reduceTyped<uint16_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_INT32: return reduceTyped<int32_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_UINT32: return reduceTyped<uint32_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_INT64: return reduceTyped<int64_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_UINT64: return reduceTyped<uint64_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_FP16: return reduceTyped<Float16>(out, a, b, count, op);
    case HCCL_DATA_TYPE_BFP16: return reduceTyped<BFloat16>(out, a, b, count, op);
    case HCCL_DATA_TYPE_FP32: return reduceTyped<float>(out, a, b, count, op);
    case HCCL_DATA_TYPE_FP64: return reduceTyped<double>(out, a, b, count, op);
    default: return;
  }
}

void reduceInto(void* acc, const void* in, size_t count, HcclDataType type, HcclReduceOp op) {
  reduceTo(acc, acc, in, count, type, op);
}

} // namespace npu_sim
