// Dedicated npu kernels for sum and mean over dimensions (the fast path of
// FastPath.h). sum() and mean() without dimensions are composite kernels
// that call these overloads.
// Tensor first: the per-op headers below only declare it.
#include <ATen/core/Tensor.h>

#include <ATen/ops/mean_cpu_dispatch.h>
#include <ATen/ops/mean_meta.h>
#include <ATen/ops/mean_native.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/sum_cpu_dispatch.h>
#include <ATen/ops/sum_meta.h>
#include <ATen/ops/sum_native.h>
#include <ATen/ops/sum_ops.h>

#include "FastPath.h"

namespace torch_npu_ops {
namespace {

TORCH_NPU_OPS_CPU_OUT_KERNEL(sum);
TORCH_NPU_OPS_CPU_OUT_KERNEL(mean);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  fast::register_kernel<fast::Functional<at::_ops::sum_dim_IntList, at::meta::structured_sum_dim_IntList, sum_cpu,
                                         at::native::structured_sum_out>,
                        at::_ops::sum_dim_IntList>(m);
  fast::register_kernel<fast::Out<at::_ops::sum_IntList_out, at::meta::structured_sum_dim_IntList, sum_cpu,
                                         at::native::structured_sum_out>,
                        at::_ops::sum_IntList_out>(m);
  fast::register_kernel<fast::Functional<at::_ops::mean_dim, at::meta::structured_mean_dim, mean_cpu,
                                         at::native::structured_mean_out>,
                        at::_ops::mean_dim>(m);
  fast::register_kernel<fast::Out<at::_ops::mean_out, at::meta::structured_mean_dim, mean_cpu,
                                         at::native::structured_mean_out>,
                        at::_ops::mean_out>(m);
}

} // namespace
} // namespace torch_npu_ops
