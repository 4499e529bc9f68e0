// Mapping between torch's types and HCCL's, and the error check for HCCL
// calls, for the hccl process group.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "npu/HcclInterface.h"

namespace c10d_npu {

// HCCL's element type for `type`; throws for a type HCCL cannot carry.
HcclDataType hccl_data_type(at::ScalarType type);

// HCCL's reduction for `op` on elements of `type` (bool: SUM is logical or,
// as with NCCL). Throws for a reduction HCCL has no equivalent of.
HcclReduceOp hccl_reduce_op(const c10d::ReduceOp& op, at::ScalarType type);

// Throws torch.distributed.DistBackendError naming the call and HCCL's
// explanation unless `result` is HCCL_SUCCESS.
void check_hccl(HcclResult result, const char* call);

} // namespace c10d_npu
