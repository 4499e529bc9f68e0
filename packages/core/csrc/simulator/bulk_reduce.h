// Reductions whose output is too large to stay in the cache (Note [Bulk
// reductions bypass the cache], bulk_reduce.cpp).
#pragma once

#include <cstddef>

#include "hccl_types.h"

namespace npu_sim {

// out[i] = inputs[0][i] (op) inputs[1][i] (op) ... (op) inputs[n - 1][i],
// combined left to right as reduceTo and reduceInto do (the same bits), for
// i < count, in one pass over the inputs that writes `out` with
// non-temporal stores, fenced before it returns. `out` may be one of the
// inputs exactly and must not overlap them otherwise; n >= 2. Returns
// false, having written nothing, where it has no such pass for `type` and
// `op` on this CPU: the caller reduces as usual then.
bool reduceBypassingCache(void* out, const char* const* inputs, size_t n, size_t count,
                          HcclDataType type, HcclReduceOp op);

// The same reduction written to each of `n_out` outputs (n_out >= 1), which
// may each be one of the inputs exactly and must not overlap the inputs or
// each other otherwise. Also false where the outputs' addresses differ
// modulo a cache line.
bool reduceToEachBypassingCache(void* const* outputs, size_t n_out, const char* const* inputs,
                                size_t n, size_t count, HcclDataType type, HcclReduceOp op);

} // namespace npu_sim
