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

template <typename T, typename Combine>
void combine(void* acc_raw, const void* in_raw, size_t count, Combine f) {
  using A = Arithmetic<T>;
  auto* acc = static_cast<T*>(acc_raw);
  const auto* in = static_cast<const T*>(in_raw);
  for (size_t i = 0; i < count; ++i) {
    acc[i] = A::store(f(A::load(acc[i]), A::load(in[i])));
  }
}

template <typename T>
void reduceTyped(void* acc, const void* in, size_t count, HcclReduceOp op) {
  using C = typename Arithmetic<T>::Compute;
  switch (op) {
    case HCCL_REDUCE_SUM:
      return combine<T>(acc, in, count, [](C a, C b) { return static_cast<C>(a + b); });
    case HCCL_REDUCE_PROD:
      return combine<T>(acc, in, count, [](C a, C b) { return static_cast<C>(a * b); });
    case HCCL_REDUCE_MAX:
      return combine<T>(acc, in, count, [](C a, C b) { return std::max(a, b); });
    case HCCL_REDUCE_MIN:
      return combine<T>(acc, in, count, [](C a, C b) { return std::min(a, b); });
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

void reduceInto(void* acc, const void* in, size_t count, HcclDataType type, HcclReduceOp op) {
  switch (type) {
    case HCCL_DATA_TYPE_INT8: return reduceTyped<int8_t>(acc, in, count, op);
    case HCCL_DATA_TYPE_UINT8: return reduceTyped<uint8_t>(acc, in, count, op);
    case HCCL_DATA_TYPE_INT16: return reduceTyped<int16_t>(acc, in, count, op);
    case HCCL_DATA_TYPE_UINT16: return reduceTyped<uint16_t>(acc, in, count, op);
    case HCCL_DATA_TYPE_INT32: return reduceTyped<int32_t>(acc, in, count, op);
    case HCCL_DATA_TYPE_UINT32: return reduceTyped<uint32_t>(acc, in, count, op);
    case HCCL_DATA_TYPE_INT64: return reduceTyped<int64_t>(acc, in, count, op);
    case HCCL_DATA_TYPE_UINT64: return reduceTyped<uint64_t>(acc, in, count, op);
    case HCCL_DATA_TYPE_FP16: return reduceTyped<_Float16>(acc, in, count, op);
    case HCCL_DATA_TYPE_BFP16: return reduceTyped<BFloat16>(acc, in, count, op);
    case HCCL_DATA_TYPE_FP32: return reduceTyped<float>(acc, in, count, op);
    case HCCL_DATA_TYPE_FP64: return reduceTyped<double>(acc, in, count, op);
    default: return;
  }
}

} // namespace npu_sim
