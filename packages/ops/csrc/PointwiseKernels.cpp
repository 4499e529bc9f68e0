// Dedicated npu kernels for the TensorIterator pointwise family (binary
// arithmetic, comparisons, common unary and activation functions, clamp,
// addcmul/addcdiv/lerp of the optimizers), in their functional, in-place and
// out= forms: the fast path of FastPath.h. The Scalar overloads (add.Scalar,
// mul.Scalar, ...) are composite kernels that call the Tensor overloads with
// a wrapped number, so they take this path too.
//
// Only structured ops whose autograd formula is their own (not a
// CompositeImplicitAutograd decomposition) may be listed: a PrivateUse1
// kernel for a composite op would stop its decomposition from serving
// autograd on npu.
// Tensor first: the per-op headers below only declare it.
#include <ATen/core/Tensor.h>

#include <ATen/ops/add_cpu_dispatch.h>
#include <ATen/ops/add_meta.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addcdiv_cpu_dispatch.h>
#include <ATen/ops/addcdiv_meta.h>
#include <ATen/ops/addcdiv_native.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_cpu_dispatch.h>
#include <ATen/ops/addcmul_meta.h>
#include <ATen/ops/addcmul_native.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/atan2_cpu_dispatch.h>
#include <ATen/ops/atan2_meta.h>
#include <ATen/ops/atan2_native.h>
#include <ATen/ops/atan2_ops.h>
#include <ATen/ops/bitwise_and_cpu_dispatch.h>
#include <ATen/ops/bitwise_and_meta.h>
#include <ATen/ops/bitwise_and_native.h>
#include <ATen/ops/bitwise_and_ops.h>
#include <ATen/ops/clamp_cpu_dispatch.h>
#include <ATen/ops/clamp_meta.h>
#include <ATen/ops/clamp_native.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/clamp_max_cpu_dispatch.h>
#include <ATen/ops/clamp_max_meta.h>
#include <ATen/ops/clamp_max_native.h>
#include <ATen/ops/clamp_max_ops.h>
#include <ATen/ops/clamp_min_cpu_dispatch.h>
#include <ATen/ops/clamp_min_meta.h>
#include <ATen/ops/clamp_min_native.h>
#include <ATen/ops/clamp_min_ops.h>
#include <ATen/ops/cos_cpu_dispatch.h>
#include <ATen/ops/cos_meta.h>
#include <ATen/ops/cos_native.h>
#include <ATen/ops/cos_ops.h>
#include <ATen/ops/div_cpu_dispatch.h>
#include <ATen/ops/div_meta.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/eq_cpu_dispatch.h>
#include <ATen/ops/eq_meta.h>
#include <ATen/ops/eq_native.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/erf_cpu_dispatch.h>
#include <ATen/ops/erf_meta.h>
#include <ATen/ops/erf_native.h>
#include <ATen/ops/erf_ops.h>
#include <ATen/ops/exp_cpu_dispatch.h>
#include <ATen/ops/exp_meta.h>
#include <ATen/ops/exp_native.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/ge_cpu_dispatch.h>
#include <ATen/ops/ge_meta.h>
#include <ATen/ops/ge_native.h>
#include <ATen/ops/ge_ops.h>
#include <ATen/ops/gelu_cpu_dispatch.h>
#include <ATen/ops/gelu_meta.h>
#include <ATen/ops/gelu_native.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/gt_cpu_dispatch.h>
#include <ATen/ops/gt_meta.h>
#include <ATen/ops/gt_native.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/le_cpu_dispatch.h>
#include <ATen/ops/le_meta.h>
#include <ATen/ops/le_native.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/lerp_cpu_dispatch.h>
#include <ATen/ops/lerp_meta.h>
#include <ATen/ops/lerp_native.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/log_cpu_dispatch.h>
#include <ATen/ops/log_meta.h>
#include <ATen/ops/log_native.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/lt_cpu_dispatch.h>
#include <ATen/ops/lt_meta.h>
#include <ATen/ops/lt_native.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/maximum_cpu_dispatch.h>
#include <ATen/ops/maximum_meta.h>
#include <ATen/ops/maximum_native.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/minimum_cpu_dispatch.h>
#include <ATen/ops/minimum_meta.h>
#include <ATen/ops/minimum_native.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/mul_cpu_dispatch.h>
#include <ATen/ops/mul_meta.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/ne_cpu_dispatch.h>
#include <ATen/ops/ne_meta.h>
#include <ATen/ops/ne_native.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/neg_cpu_dispatch.h>
#include <ATen/ops/neg_meta.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/pow_cpu_dispatch.h>
#include <ATen/ops/pow_meta.h>
#include <ATen/ops/pow_native.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/reciprocal_cpu_dispatch.h>
#include <ATen/ops/reciprocal_meta.h>
#include <ATen/ops/reciprocal_native.h>
#include <ATen/ops/reciprocal_ops.h>
#include <ATen/ops/rsqrt_cpu_dispatch.h>
#include <ATen/ops/rsqrt_meta.h>
#include <ATen/ops/rsqrt_native.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/sigmoid_cpu_dispatch.h>
#include <ATen/ops/sigmoid_meta.h>
#include <ATen/ops/sigmoid_native.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/silu_cpu_dispatch.h>
#include <ATen/ops/silu_meta.h>
#include <ATen/ops/silu_native.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sin_cpu_dispatch.h>
#include <ATen/ops/sin_meta.h>
#include <ATen/ops/sin_native.h>
#include <ATen/ops/sin_ops.h>
#include <ATen/ops/sqrt_cpu_dispatch.h>
#include <ATen/ops/sqrt_meta.h>
#include <ATen/ops/sqrt_native.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/sub_cpu_dispatch.h>
#include <ATen/ops/sub_meta.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/tanh_cpu_dispatch.h>
#include <ATen/ops/tanh_meta.h>
#include <ATen/ops/tanh_native.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/threshold_backward_cpu_dispatch.h>
#include <ATen/ops/threshold_backward_meta.h>
#include <ATen/ops/threshold_backward_native.h>
#include <ATen/ops/threshold_backward_ops.h>

#include "FastPath.h"

namespace torch_npu_ops {
namespace {

TORCH_NPU_OPS_CPU_KERNELS(add);
TORCH_NPU_OPS_CPU_KERNELS(addcdiv);
TORCH_NPU_OPS_CPU_KERNELS(addcmul);
TORCH_NPU_OPS_CPU_KERNELS(atan2);
TORCH_NPU_OPS_CPU_KERNELS(bitwise_and);
TORCH_NPU_OPS_CPU_KERNELS(clamp);
TORCH_NPU_OPS_CPU_KERNELS(clamp_max);
TORCH_NPU_OPS_CPU_KERNELS(clamp_min);
TORCH_NPU_OPS_CPU_KERNELS(cos);
TORCH_NPU_OPS_CPU_KERNELS(div);
TORCH_NPU_OPS_CPU_KERNELS(eq);
TORCH_NPU_OPS_CPU_KERNELS(erf);
TORCH_NPU_OPS_CPU_KERNELS(exp);
TORCH_NPU_OPS_CPU_KERNELS(ge);
TORCH_NPU_OPS_CPU_KERNELS(gelu);
TORCH_NPU_OPS_CPU_KERNELS(gt);
TORCH_NPU_OPS_CPU_KERNELS(le);
TORCH_NPU_OPS_CPU_KERNELS(lerp);
TORCH_NPU_OPS_CPU_KERNELS(log);
TORCH_NPU_OPS_CPU_KERNELS(lt);
TORCH_NPU_OPS_CPU_OUT_KERNEL(maximum);
TORCH_NPU_OPS_CPU_OUT_KERNEL(minimum);
TORCH_NPU_OPS_CPU_KERNELS(mul);
TORCH_NPU_OPS_CPU_KERNELS(ne);
TORCH_NPU_OPS_CPU_KERNELS(neg);
TORCH_NPU_OPS_CPU_KERNELS(pow);
TORCH_NPU_OPS_CPU_KERNELS(reciprocal);
TORCH_NPU_OPS_CPU_KERNELS(rsqrt);
TORCH_NPU_OPS_CPU_KERNELS(sigmoid);
TORCH_NPU_OPS_CPU_KERNELS(silu);
TORCH_NPU_OPS_CPU_KERNELS(sin);
TORCH_NPU_OPS_CPU_KERNELS(sqrt);
TORCH_NPU_OPS_CPU_KERNELS(sub);
TORCH_NPU_OPS_CPU_KERNELS(tanh);
TORCH_NPU_OPS_CPU_OUT_KERNEL(threshold_backward);

// Registers the functional, in-place and out= overloads (at::_ops names) of
// a structured op with meta class `META` and CPU kernel class `NATIVE`
// (at::native::; what replays run, Note [Prepared kernels of replayed work]).
#define NPU_STRUCTURED_NO_INPLACE(m, cpu, META, NATIVE, functional, out)                                  \
  fast::register_kernel<                                                                                 \
      fast::Functional<at::_ops::functional, at::meta::META, cpu##_cpu, at::native::NATIVE>,             \
      at::_ops::functional>(m);                                                                          \
  fast::register_kernel<fast::Out<at::_ops::out, at::meta::META, cpu##_cpu, at::native::NATIVE>,         \
                        at::_ops::out>(m)
#define NPU_STRUCTURED(m, cpu, META, NATIVE, functional, inplace, out)                                    \
  NPU_STRUCTURED_NO_INPLACE(m, cpu, META, NATIVE, functional, out);                                      \
  fast::register_kernel<fast::Inplace<at::_ops::inplace, at::meta::META, cpu##_cpu, at::native::NATIVE>, \
                        at::_ops::inplace>(m)

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NPU_STRUCTURED(m, add, structured_add_Tensor, structured_ufunc_add_CPU, add_Tensor, add__Tensor, add_out);
  NPU_STRUCTURED(m, sub, structured_sub_Tensor, structured_sub_out, sub_Tensor, sub__Tensor, sub_out);
  NPU_STRUCTURED(m, mul, structured_mul_Tensor, structured_mul_out, mul_Tensor, mul__Tensor, mul_out);
  NPU_STRUCTURED(m, div, structured_div_Tensor, structured_div_out, div_Tensor, div__Tensor, div_out);
  NPU_STRUCTURED(m, div, structured_div_Tensor_mode, structured_div_out_mode,
                 div_Tensor_mode, div__Tensor_mode, div_out_mode);
  NPU_STRUCTURED_NO_INPLACE(m, maximum, structured_maximum, structured_maximum_out, maximum, maximum_out);
  NPU_STRUCTURED_NO_INPLACE(m, minimum, structured_minimum, structured_minimum_out, minimum, minimum_out);
  NPU_STRUCTURED(m, pow, structured_pow_Tensor_Tensor, structured_pow_Tensor_Tensor_out,
                 pow_Tensor_Tensor, pow__Tensor, pow_Tensor_Tensor_out);
  NPU_STRUCTURED(m, pow, structured_pow_Tensor_Scalar, structured_pow_Tensor_Scalar_out,
                 pow_Tensor_Scalar, pow__Scalar, pow_Tensor_Scalar_out);
  NPU_STRUCTURED(m, atan2, structured_atan2, structured_atan2_out, atan2, atan2_, atan2_out);
  NPU_STRUCTURED(m, bitwise_and, structured_bitwise_and_Tensor, structured_bitwise_and_out,
                 bitwise_and_Tensor, bitwise_and__Tensor, bitwise_and_Tensor_out);
  NPU_STRUCTURED(m, addcmul, structured_addcmul, structured_addcmul_out, addcmul, addcmul_, addcmul_out);
  NPU_STRUCTURED(m, addcdiv, structured_addcdiv, structured_addcdiv_out, addcdiv, addcdiv_, addcdiv_out);
  NPU_STRUCTURED(m, lerp, structured_lerp_Scalar, structured_lerp_Scalar, lerp_Scalar, lerp__Scalar, lerp_Scalar_out);
  NPU_STRUCTURED(m, lerp, structured_lerp_Tensor, structured_lerp_Tensor, lerp_Tensor, lerp__Tensor, lerp_Tensor_out);
  NPU_STRUCTURED(m, clamp, structured_clamp, structured_clamp_out, clamp, clamp_, clamp_out);
  NPU_STRUCTURED(m, clamp_min, structured_clamp_min, structured_clamp_min_out, clamp_min, clamp_min_, clamp_min_out);
  NPU_STRUCTURED(m, clamp_max, structured_clamp_max, structured_clamp_max_out, clamp_max, clamp_max_, clamp_max_out);
  NPU_STRUCTURED(m, eq, structured_eq_Tensor, structured_eq_Tensor_out, eq_Tensor, eq__Tensor, eq_Tensor_out);
  NPU_STRUCTURED(m, eq, structured_eq_Scalar, structured_eq_Scalar_out, eq_Scalar, eq__Scalar, eq_Scalar_out);
  NPU_STRUCTURED(m, ne, structured_ne_Tensor, structured_ne_Tensor_out, ne_Tensor, ne__Tensor, ne_Tensor_out);
  NPU_STRUCTURED(m, ne, structured_ne_Scalar, structured_ne_Scalar_out, ne_Scalar, ne__Scalar, ne_Scalar_out);
  NPU_STRUCTURED(m, lt, structured_lt_Tensor, structured_lt_Tensor_out, lt_Tensor, lt__Tensor, lt_Tensor_out);
  NPU_STRUCTURED(m, lt, structured_lt_Scalar, structured_lt_Scalar_out, lt_Scalar, lt__Scalar, lt_Scalar_out);
  NPU_STRUCTURED(m, le, structured_le_Tensor, structured_le_Tensor_out, le_Tensor, le__Tensor, le_Tensor_out);
  NPU_STRUCTURED(m, le, structured_le_Scalar, structured_le_Scalar_out, le_Scalar, le__Scalar, le_Scalar_out);
  NPU_STRUCTURED(m, gt, structured_gt_Tensor, structured_gt_Tensor_out, gt_Tensor, gt__Tensor, gt_Tensor_out);
  NPU_STRUCTURED(m, gt, structured_gt_Scalar, structured_gt_Scalar_out, gt_Scalar, gt__Scalar, gt_Scalar_out);
  NPU_STRUCTURED(m, ge, structured_ge_Tensor, structured_ge_Tensor_out, ge_Tensor, ge__Tensor, ge_Tensor_out);
  NPU_STRUCTURED(m, ge, structured_ge_Scalar, structured_ge_Scalar_out, ge_Scalar, ge__Scalar, ge_Scalar_out);
  NPU_STRUCTURED(m, neg, structured_neg, structured_neg_out, neg, neg_, neg_out);
  NPU_STRUCTURED(m, exp, structured_exp, structured_exp_out, exp, exp_, exp_out);
  NPU_STRUCTURED(m, log, structured_log, structured_log_out, log, log_, log_out);
  NPU_STRUCTURED(m, sqrt, structured_sqrt, structured_sqrt_out, sqrt, sqrt_, sqrt_out);
  NPU_STRUCTURED(m, rsqrt, structured_rsqrt, structured_rsqrt_out, rsqrt, rsqrt_, rsqrt_out);
  NPU_STRUCTURED(m, sin, structured_sin, structured_sin_out, sin, sin_, sin_out);
  NPU_STRUCTURED(m, cos, structured_cos, structured_cos_out, cos, cos_, cos_out);
  NPU_STRUCTURED(m, tanh, structured_tanh, structured_tanh_out, tanh, tanh_, tanh_out);
  NPU_STRUCTURED(m, sigmoid, structured_sigmoid, structured_sigmoid_out, sigmoid, sigmoid_, sigmoid_out);
  NPU_STRUCTURED(m, reciprocal, structured_reciprocal, structured_reciprocal_out,
                 reciprocal, reciprocal_, reciprocal_out);
  NPU_STRUCTURED(m, erf, structured_erf, structured_erf_out, erf, erf_, erf_out);
  NPU_STRUCTURED(m, gelu, structured_gelu, structured_gelu_out_cpu, gelu, gelu_, gelu_out);
  NPU_STRUCTURED(m, silu, structured_silu, structured_silu_out, silu, silu_, silu_out);
  NPU_STRUCTURED_NO_INPLACE(m, threshold_backward, structured_threshold_backward, structured_threshold_backward_out,
                            threshold_backward, threshold_backward_grad_input);
}

} // namespace
} // namespace torch_npu_ops
