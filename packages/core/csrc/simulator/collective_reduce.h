// Element types and reductions of the simulated HCCL: the arithmetic a real
// NPU's collective engine does on the data it receives.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hccl_types.h"

namespace npu_sim {

// Bytes per element, or 0 for a type the simulator does not support.
size_t hcclElementSize(HcclDataType type);

const char* hcclDataTypeName(HcclDataType type);
const char* hcclReduceOpName(HcclReduceOp op);
bool isValidReduceOp(HcclReduceOp op);

// acc[i] = acc[i] (op) in[i] for i < count. `acc` and `in` do not overlap.
// The type and op must be valid (checked when the call was made).
void reduceInto(void* acc, const void* in, size_t count, HcclDataType type, HcclReduceOp op);
// out[i] = a[i] (op) b[i] for i < count: one pass where a copy of `a` into
// `out` and reduceInto would take two. `out` may be `a` or `b` exactly, and
// must not overlap them otherwise.
void reduceTo(void* out, const void* a, const void* b, size_t count, HcclDataType type,
              HcclReduceOp op);

} // namespace npu_sim
