#include "collective_reduce.h"

#include <algorithm>
#include <cstring>

namespace npu_sim {
namespace {

// bfloat16 is the top half of a float32; round to nearest even when narrowing.
struct BFloat16 {
  uint16_t bits;
};

inline float widen(BFloat16 v) {
  const uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline BFloat16 narrow(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return BFloat16{static_cast<uint16_t>((u >> 16) | 0x40u)}; // quiet NaN
  }
  u += 0x7fffu + ((u >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>(u >> 16)};
}

template <typename T>
struct Arithmetic {
  // Computes in T itself, except for the 16-bit floats (below).
  using Compute = T;
  static Compute load(T v) { return v; }
  static T store(Compute v) { return v; }
};

template <>
struct Arithmetic<_Float16> {
  using Compute = float;
  static float load(_Float16 v) { return static_cast<float>(v); }
  static _Float16 store(float v) { return static_cast<_Float16>(v); }
};

template <>
struct Arithmetic<BFloat16> {
  using Compute = float;
  static float load(BFloat16 v) { return widen(v); }
  static BFloat16 store(float v) { return narrow(v); }
};

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
  switch (type) {
    case HCCL_DATA_TYPE_INT8: return reduceTyped<int8_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_UINT8: return reduceTyped<uint8_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_INT16: return reduceTyped<int16_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_UINT16: return reduceTyped<uint16_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_INT32: return reduceTyped<int32_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_UINT32: return reduceTyped<uint32_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_INT64: return reduceTyped<int64_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_UINT64: return reduceTyped<uint64_t>(out, a, b, count, op);
    case HCCL_DATA_TYPE_FP16: return reduceTyped<_Float16>(out, a, b, count, op);
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
