// Dedicated npu kernels for the matrix products (mm, bmm, addmm, baddbmm):
// the fast path of FastPath.h. Transformer layers run several per step, and
// their meta functions are C++, so the host does not need the generic
// executor's boxed machinery for them.
// Tensor first: the per-op headers below only declare it.
#include <ATen/core/Tensor.h>

#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/addmm_meta.h>
#include <ATen/ops/addmm_native.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/baddbmm_cpu_dispatch.h>
#include <ATen/ops/baddbmm_meta.h>
#include <ATen/ops/baddbmm_native.h>
#include <ATen/ops/baddbmm_ops.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <ATen/ops/bmm_meta.h>
#include <ATen/ops/bmm_native.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/mm_cpu_dispatch.h>
#include <ATen/ops/mm_meta.h>
#include <ATen/ops/mm_native.h>
#include <ATen/ops/mm_ops.h>

#include "FastPath.h"

namespace torch_npu_ops {
namespace {

TORCH_NPU_OPS_CPU_KERNELS(addmm);
TORCH_NPU_OPS_CPU_KERNELS(baddbmm);
TORCH_NPU_OPS_CPU_OUT_KERNEL(mm);
TORCH_NPU_OPS_CPU_OUT_KERNEL(bmm);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace fast;
  // The CPU kernel classes replays call (Note [Prepared kernels of replayed work]).
  using MmNative = at::native::structured_mm_out_cpu;
  using BmmNative = at::native::structured_bmm_out_cpu;
  using AddmmNative = at::native::structured_addmm_out_cpu;
  using BaddbmmNative = at::native::structured_baddbmm_out_cpu;
  using at::meta::structured_addmm;
  using at::meta::structured_baddbmm;
  using at::meta::structured_bmm;
  using at::meta::structured_mm;
  register_kernel<Functional<at::_ops::mm, structured_mm, mm_cpu, MmNative>, at::_ops::mm>(m);
  register_kernel<Out<at::_ops::mm_out, structured_mm, mm_cpu, MmNative>, at::_ops::mm_out>(m);
  register_kernel<Functional<at::_ops::bmm, structured_bmm, bmm_cpu, BmmNative>, at::_ops::bmm>(m);
  register_kernel<Out<at::_ops::bmm_out, structured_bmm, bmm_cpu, BmmNative>, at::_ops::bmm_out>(m);
  register_kernel<Functional<at::_ops::addmm, structured_addmm, addmm_cpu, AddmmNative>, at::_ops::addmm>(m);
  register_kernel<Inplace<at::_ops::addmm_, structured_addmm, addmm_cpu, AddmmNative>, at::_ops::addmm_>(m);
  register_kernel<Out<at::_ops::addmm_out, structured_addmm, addmm_cpu, AddmmNative>, at::_ops::addmm_out>(m);
  register_kernel<Functional<at::_ops::baddbmm, structured_baddbmm, baddbmm_cpu, BaddbmmNative>, at::_ops::baddbmm>(m);
  register_kernel<Inplace<at::_ops::baddbmm_, structured_baddbmm, baddbmm_cpu, BaddbmmNative>, at::_ops::baddbmm_>(m);
  register_kernel<Out<at::_ops::baddbmm_out, structured_baddbmm, baddbmm_cpu, BaddbmmNative>,
                  at::_ops::baddbmm_out>(m);
}

} // namespace
} // namespace torch_npu_ops
