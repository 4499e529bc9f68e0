#include "HcclTypes.h"

#include <c10/util/Exception.h>

namespace c10d_npu {
namespace {

const char* reduce_op_name(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

} // namespace

HcclDataType hccl_data_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return HCCL_DATA_TYPE_FP32;
    case at::kHalf: return HCCL_DATA_TYPE_FP16;
    case at::kBFloat16: return HCCL_DATA_TYPE_BFP16;
    case at::kDouble: return HCCL_DATA_TYPE_FP64;
    case at::kChar: return HCCL_DATA_TYPE_INT8;
    case at::kByte: return HCCL_DATA_TYPE_UINT8;
    case at::kBool: return HCCL_DATA_TYPE_UINT8;
    case at::kShort: return HCCL_DATA_TYPE_INT16;
    case at::kInt: return HCCL_DATA_TYPE_INT32;
    case at::kLong: return HCCL_DATA_TYPE_INT64;
    case at::kUInt16: return HCCL_DATA_TYPE_UINT16;
    case at::kUInt32: return HCCL_DATA_TYPE_UINT32;
    case at::kUInt64: return HCCL_DATA_TYPE_UINT64;
    default:
      TORCH_CHECK_TYPE(
          false, "ProcessGroupHCCL: HCCL cannot carry tensors of dtype ", type,
          "; supported are float32, float16, bfloat16, float64, the integer types, bool "
          "and (for sum) the complex types");
  }
}

HcclReduceOp hccl_reduce_op(const c10d::ReduceOp& op, at::ScalarType type) {
  if (type == at::kBool) {
    // Booleans are bytes of 0 and 1: sum and product become or and and.
    switch (op.op_) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::MAX: return HCCL_REDUCE_MAX;
      case c10d::ReduceOp::PRODUCT:
      case c10d::ReduceOp::MIN: return HCCL_REDUCE_MIN;
      default: break;
    }
  }
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return HCCL_REDUCE_SUM;
    case c10d::ReduceOp::PRODUCT: return HCCL_REDUCE_PROD;
    case c10d::ReduceOp::MAX: return HCCL_REDUCE_MAX;
    case c10d::ReduceOp::MIN: return HCCL_REDUCE_MIN;
    default:
      TORCH_CHECK_VALUE(
          false, "ProcessGroupHCCL does not support ReduceOp.", reduce_op_name(op),
          " for dtype ", type, ": HCCL reduces by SUM, PRODUCT, MAX and MIN (AVG is a "
          "sum and a division, PREMUL_SUM a multiplication and a sum)");
  }
}

void check_hccl(HcclResult result, const char* call) {
  if (result != HCCL_SUCCESS) {
    C10_THROW_ERROR(
        DistBackendError,
        std::string("ProcessGroupHCCL: ") + call + " failed: " +
            c10_npu::hccl::describe_error(result));
  }
}

} // namespace c10d_npu
