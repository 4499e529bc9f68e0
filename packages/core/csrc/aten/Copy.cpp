// Copies between host and npu and between npu devices, stream-ordered.
//
// Contiguous same-dtype copies are runtime memcpys on the current stream of
// the npu side; anything else (strides, broadcasting, dtype conversion) is
// first made contiguous on the side where that is cheapest, with a device
// kernel on npu. A non_blocking copy is asynchronous only when the host side
// is pinned memory, as on CUDA; otherwise the host bytes have been read when
// the copy returns (small host-to-device copies are staged, see Note [Staged
// host-to-device copies]; the rest wait for the copy).
#include <array>
#include <atomic>
#include <cstring>

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/_neg_view.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <torch/library.h>

#include "aten/DeviceTensorView.h"
#include "npu/NPUEvent.h"
#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUHostAllocator.h"
#include "npu/NPUStream.h"
#include "npu/NPUWork.h"
#include "npu/SyncDebugMode.h"
#include "npu/WorkAccesses.h"
#include "npu/impl/AclInterface.h"

namespace c10_npu::aten {
namespace {

bool is_npu(const at::Tensor& t) {
  return t.device().type() == c10::DeviceType::PrivateUse1;
}

size_t nbytes(const at::Tensor& t) {
  return static_cast<size_t>(t.numel()) * t.element_size();
}

// Raises at the call, with the CPU's message, when the CPU copy kernel does
// not implement copies from `src` to `dst` dtype (the bit-field, sub-byte
// integer and float4 dtypes): the device work that runs it would otherwise
// fail only at the next synchronisation. The answer for a pair is found once,
// by a small strided copy on the CPU, and kept when the kernel takes it.
void check_cpu_copy_kernel(c10::ScalarType dst, c10::ScalarType src) {
  if (c10::isQIntType(dst) || c10::isQIntType(src)) {
    return; // quantized copies move integer views (Note [Quantized npu tensors], the ops package)
  }
  constexpr auto kTypes = static_cast<size_t>(c10::ScalarType::NumOptions);
  static std::array<std::atomic<bool>, kTypes * kTypes> accepted{};
  auto& known = accepted[static_cast<size_t>(dst) * kTypes + static_cast<size_t>(src)];
  if (known.load(std::memory_order_relaxed)) {
    return;
  }
  const auto cpu = at::TensorOptions().device(c10::kCPU);
  at::Tensor source = at::empty({2, 2}, cpu.dtype(src));
  std::memset(source.mutable_data_ptr(), 0, source.nbytes());
  at::empty({2, 2}, cpu.dtype(dst)).copy_(source.t());
  known.store(true, std::memory_order_relaxed);
}

// dst.copy_(src) as device work on `stream`; handles strides, broadcasting
// (zero strides) and dtype conversion with PyTorch's CPU copy kernel.
void launch_strided_copy(const NPUStream& stream, const at::Tensor& dst, const at::Tensor& src) {
  check_cpu_copy_kernel(dst.scalar_type(), src.scalar_type());
  WorkAccessScope accesses;
  accesses.read(src);
  accesses.write(dst);
  launch_host_work(stream, "aten::copy_", [dst = TensorDesc(dst), src = TensorDesc(src)] {
    dst.cpu_view().copy_(src.cpu_view());
  });
}

// A contiguous npu tensor on src's device with the values of `src` as dtype
// `dtype`, shaped like `shape` (src may broadcast to it).
at::Tensor contiguous_on_device(const at::Tensor& src, c10::ScalarType dtype, c10::IntArrayRef shape) {
  if (src.is_contiguous() && src.scalar_type() == dtype && src.sizes().equals(shape)) {
    return src;
  }
  const NPUGuard guard(src.device());
  at::Tensor out = at::empty(shape, src.options().dtype(dtype));
  launch_strided_copy(getCurrentNPUStream(src.device().index()), out, src.expand(shape));
  return out;
}

void memcpy_async(void* dst, const void* src, size_t count, aclrtMemcpyKind kind, const NPUStream& stream) {
  if (count == 0) {
    return;
  }
  NPU_CHECK(acl::api().aclrtMemcpyAsync(dst, count, src, count, kind, stream.stream()));
  if (launch_blocking()) {
    stream.synchronize();
  }
}

// Note [Staged host-to-device copies]
// A blocking copy from pageable host memory must have read the host bytes
// when it returns (the caller may change them next), but nothing later on
// the host needs the device side: only later work on the stream does. Up
// to kStagedCopyMaxBytes, the bytes are therefore copied into a pinned
// staging block on the host and the device copy is queued from there, as
// the CUDA driver stages pageable memory; the host does not wait for the
// stream's earlier work (a training step copies its batch this way every
// step, while the device still runs the last optimizer step). On an idle
// stream the copy waits as before: there is nothing to wait for, and the
// host then runs the copy itself, cheaper than staging. The staging block returns to
// the pinned cache once the copy has run. Larger copies wait instead of
// doubling their memory traffic.
constexpr size_t kStagedCopyMaxBytes = 4 << 20;

void copy_host_to_device(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  const NPUGuard guard(dst.device());
  const NPUStream stream = getCurrentNPUStream(dst.device().index());
  // The host side, contiguous, of dst's dtype and shape (CPU work if needed).
  at::Tensor host = src;
  if (!(src.is_contiguous() && src.scalar_type() == dst.scalar_type() && src.sizes().equals(dst.sizes()))) {
    host = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  }
  if (!non_blocking) {
    warn_or_error_on_sync(); // Note [Synchronizing operations]
  }
  const bool async = non_blocking && host.is_same(src) && NPUHostAllocator::is_pinned_ptr(host.const_data_ptr());
  const size_t count = nbytes(host);
  // An idle stream is cheaper to synchronize with: the host then runs the
  // copy itself (see the simulator's Stream::waitFor) instead of staging it.
  const bool staged =
      !async && count > 0 && count <= kStagedCopyMaxBytes && !launch_blocking() && !stream.query();
  if (staged) {
    // Note [Staged host-to-device copies]
    at::Tensor staging = at::empty(host.sizes(), host.options().pinned_memory(true));
    std::memcpy(staging.mutable_data_ptr(), host.const_data_ptr(), count);
    host = staging;
  }
  at::Tensor device = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
  ensure_device_context(dst.device().index());
  memcpy_async(device.data_ptr(), host.const_data_ptr(), count, ACL_MEMCPY_HOST_TO_DEVICE, stream);
  if (!device.is_same(dst)) {
    launch_strided_copy(stream, dst, device);
  }
  if (async || staged) {
    // Keep the pinned block from being reused before the copy has run.
    NPUHostAllocator::record_event(
        const_cast<void*>(host.const_data_ptr()), host.storage().data_ptr().get_context(), stream);
  } else {
    stream.synchronize();
  }
}

void copy_device_to_host(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  if (!non_blocking) {
    // Before anything is queued: an error leaves no work writing into dst.
    warn_or_error_on_sync(); // Note [Synchronizing operations]
  }
  const NPUGuard guard(src.device());
  const NPUStream stream = getCurrentNPUStream(src.device().index());
  const at::Tensor device = contiguous_on_device(src, dst.scalar_type(), dst.sizes());
  const bool direct = dst.is_contiguous();
  at::Tensor host = direct ? dst : at::empty(dst.sizes(), dst.options().memory_format(c10::MemoryFormat::Contiguous));
  ensure_device_context(src.device().index());
  memcpy_async(host.mutable_data_ptr(), device.const_data_ptr(), nbytes(device), ACL_MEMCPY_DEVICE_TO_HOST, stream);
  const bool async = non_blocking && direct && NPUHostAllocator::is_pinned_ptr(dst.const_data_ptr());
  if (async) {
    NPUHostAllocator::record_event(dst.mutable_data_ptr(), dst.storage().data_ptr().get_context(), stream);
    return;
  }
  stream.synchronize();
  if (!direct) {
    dst.copy_(host);
  }
}

void copy_device_to_device(const at::Tensor& dst, const at::Tensor& src) {
  const auto dst_device = dst.device().index();
  const auto src_device = src.device().index();
  if (dst_device == src_device) {
    const NPUGuard guard(dst.device());
    const NPUStream stream = getCurrentNPUStream(dst_device);
    if (dst.is_contiguous() && src.is_contiguous() && dst.scalar_type() == src.scalar_type() &&
        dst.sizes().equals(src.sizes())) {
      ensure_device_context(dst_device);
      memcpy_async(dst.data_ptr(), src.const_data_ptr(), nbytes(dst), ACL_MEMCPY_DEVICE_TO_DEVICE, stream);
    } else {
      launch_strided_copy(stream, dst, src.expand(dst.sizes()));
    }
    return;
  }
  // Across devices: a contiguous source on its own device, then a memcpy on
  // the destination's stream, ordered both ways with events so that neither
  // side's memory is reused while the copy is pending.
  const at::Tensor source = contiguous_on_device(src, dst.scalar_type(), dst.sizes());
  const NPUStream src_stream = getCurrentNPUStream(src_device);
  const NPUStream dst_stream = getCurrentNPUStream(dst_device);
  NPUEvent source_ready;
  source_ready.record(src_stream);
  source_ready.block(dst_stream);

  const NPUGuard guard(dst.device());
  at::Tensor target = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
  ensure_device_context(dst_device);
  memcpy_async(target.data_ptr(), source.const_data_ptr(), nbytes(target), ACL_MEMCPY_DEVICE_TO_DEVICE, dst_stream);
  if (!target.is_same(dst)) {
    launch_strided_copy(dst_stream, dst, target);
  }
  NPUEvent copy_done;
  copy_done.record(dst_stream);
  copy_done.block(src_stream);
}

// An npu tensor holding the values that `src`'s conjugate and negative bits
// stand for, without the bits (the CPU copy kernel resolves them).
at::Tensor resolve_bits_on_device(const at::Tensor& src) {
  const NPUGuard guard(src.device());
  at::Tensor out = at::empty(src.sizes(), src.options());
  WorkAccessScope accesses;
  accesses.read(src);
  accesses.write(out);
  launch_host_work(
      getCurrentNPUStream(src.device().index()), "aten::copy_",
      [dst = TensorDesc(out), src = TensorDesc(src), conj = src.is_conj(), neg = src.is_neg()] {
        at::Tensor view = src.cpu_view();
        view = conj ? view.conj() : view;
        view = neg ? view._neg_view() : view;
        dst.cpu_view().copy_(view);
      });
  return out;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const at::Tensor& src = self;
  TORCH_CHECK(
      at::is_expandable_to(src.sizes(), dst.sizes()), "copy_: the source of shape ", src.sizes(),
      " cannot be copied into a tensor of shape ", dst.sizes(),
      " (it must have the same shape or broadcast to it).");
  if (dst.numel() == 0) {
    return dst;
  }
  // Note [Overlapping copies are refused as on CPU]
  // ATen sends copy_ into or out of a PrivateUse1 tensor straight to
  // _copy_from, before the memory-overlap checks its own copies make. Without
  // them, x.copy_(x.t()) or x[1:].copy_(x[:-1]) on npu read elements the copy
  // had already overwritten and returned garbage where CPU and CUDA raise.
  // The same checks, with the same messages: no element of dst written twice,
  // and a source sharing dst's memory only element for element (same start,
  // extent and strides), as when self and src are one tensor.
  at::assert_no_internal_overlap(dst);
  if (!src.is_same(dst)) {
    at::assert_no_partial_overlap(dst, src);
  }
  // Conjugate and negative views reach us with their bits (see the
  // registrations below); the copies themselves move stored values.
  if (dst.is_conj() || dst.is_neg()) {
    // dst reads conj(neg(stored)): write stored = neg(conj(src)) instead
    // (each of conj() and _neg_view() flips its bit).
    at::Tensor stored = dst;
    at::Tensor source = src;
    if (dst.is_conj()) {
      stored = stored.conj();
      source = source.conj();
    }
    if (dst.is_neg()) {
      stored = stored._neg_view();
      source = source._neg_view();
    }
    copy_from(source, stored, non_blocking);
    return dst;
  }
  if (src.is_conj() || src.is_neg()) {
    copy_from(is_npu(src) ? resolve_bits_on_device(src) : src.resolve_conj().resolve_neg(), dst, non_blocking);
    return dst;
  }
  if (is_npu(dst) && is_npu(src)) {
    copy_device_to_device(dst, src);
  } else if (is_npu(dst)) {
    TORCH_CHECK(src.device().is_cpu(), "Copying from ", src.device(), " to npu is not supported; copy through the CPU.");
    copy_host_to_device(dst, src, non_blocking);
  } else {
    TORCH_CHECK(dst.device().is_cpu(), "Copying from npu to ", dst.device(), " is not supported; copy through the CPU.");
    copy_device_to_host(dst, src, non_blocking);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (!dst.sizes().equals(self.sizes())) {
    dst.resize_(self.sizes());
  }
  return copy_from(self, dst, false);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
}

// The conjugate and negative bits' fallback would resolve a source with a bit
// by cloning it; cloning an npu tensor copies it through _copy_from again,
// recursing until the stack overflows. copy_from resolves the bits itself.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

} // namespace c10_npu::aten
