// Dedicated npu kernels for softmax and log_softmax and their backward
// (the fast path of FastPath.h): attention and the loss run them every step.
// Tensor first: the per-op headers below only declare it.
#include <ATen/core/Tensor.h>

#include <ATen/ops/_log_softmax_backward_data_cpu_dispatch.h>
#include <ATen/ops/_log_softmax_backward_data_meta.h>
#include <ATen/ops/_log_softmax_backward_data_native.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_cpu_dispatch.h>
#include <ATen/ops/_log_softmax_meta.h>
#include <ATen/ops/_log_softmax_native.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_cpu_dispatch.h>
#include <ATen/ops/_softmax_backward_data_meta.h>
#include <ATen/ops/_softmax_backward_data_native.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_cpu_dispatch.h>
#include <ATen/ops/_softmax_meta.h>
#include <ATen/ops/_softmax_native.h>
#include <ATen/ops/_softmax_ops.h>

#include "FastPath.h"

namespace torch_npu_ops {
namespace {

TORCH_NPU_OPS_CPU_OUT_KERNEL(_softmax);
TORCH_NPU_OPS_CPU_OUT_KERNEL(_log_softmax);
TORCH_NPU_OPS_CPU_OUT_KERNEL(_softmax_backward_data);
TORCH_NPU_OPS_CPU_OUT_KERNEL(_log_softmax_backward_data);

// NATIVE: the CPU kernel class (Note [Prepared kernels of replayed work]).
#define NPU_STRUCTURED(m, name, NATIVE, out)                                                                   \
  fast::register_kernel<                                                                                      \
      fast::Functional<at::_ops::name, at::meta::structured_##name, name##_cpu, at::native::NATIVE>,          \
      at::_ops::name>(m);                                                                                     \
  fast::register_kernel<fast::Out<at::_ops::out, at::meta::structured_##name, name##_cpu, at::native::NATIVE>, \
                        at::_ops::out>(m)

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NPU_STRUCTURED(m, _softmax, structured_softmax_cpu_out, _softmax_out);
  NPU_STRUCTURED(m, _log_softmax, structured_log_softmax_cpu_out, _log_softmax_out);
  NPU_STRUCTURED(m, _softmax_backward_data, structured_softmax_backward_cpu_out, _softmax_backward_data_out);
  NPU_STRUCTURED(m, _log_softmax_backward_data, structured_log_softmax_backward_cpu_out,
                 _log_softmax_backward_data_out);
}

} // namespace
} // namespace torch_npu_ops
