// Quantized tensors on npu: quantize, dequantize, int_repr, views, copies
// and moves between devices, as on the CPU.
//
// Note [Quantized npu tensors]
// A quantized npu tensor is ATen's own QTensorImpl over npu memory (made by
// at::new_qtensor with the npu caching allocator), so its quantizer, views
// and serialization are ATen's; its dispatch key is QuantizedPrivateUse1.
// What touches values runs as device work on the current stream, through
// the CPU's quantization routines applied to CPU aliases of the device
// memory (a quantized alias carries the tensor's quantizer, with its
// per-channel scales and zero points copied to the host at the call):
// quantize_per_tensor/_channel (and their tensor-qparams, list and dynamic
// forms), dequantize. Moving integer values (copy_, clone, int_repr,
// _make_*_quantized_tensor, .cpu(), .to("npu")) goes through an integer
// view of the same storage (uint8 for quint8, int8 for qint8, int32 for
// qint32), so the ordinary npu copies and their stream ordering apply;
// flip is such a move too (the integers reversed, the quantizer kept; a
// per-channel tensor is refused where the CPU refuses it).
// Argument errors are raised at the call: the host first runs the CPU's
// routine on an empty (or one-element-per-channel) CPU tensor with the same
// arguments, so a bad dtype, zero point or axis raises the CPU's error and
// nothing is queued.
// Not supported (refused at the call by the QuantizedPrivateUse1 fallback,
// saying to dequantize or to use the CPU): quantized compute kernels (the
// CPU's come from FBGEMM/QNNPACK: quantized::linear, conv, add, relu,
// index_select, ...), resize_, and the sub-byte dtypes quint4x2/quint2x4.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/quantized/AffineQuantizer.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/empty_strided_native.h>
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <vector>

#include "LaunchSite.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUStream.h"
#include "npu/NPUWork.h"
#include "npu/WorkAccesses.h"

namespace torch_npu_ops {
namespace {

bool is_sub_byte(c10::ScalarType dtype) {
  return dtype == c10::kQUInt4x2 || dtype == c10::kQUInt2x4;
}

void check_not_sub_byte(c10::ScalarType dtype) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      !is_sub_byte(dtype), "npu does not support the sub-byte quantized dtype ",
      dtype == c10::kQUInt4x2 ? "torch.quint4x2" : "torch.quint2x4",
      " yet (quint8, qint8 and qint32 are supported). Quantize on the CPU instead, e.g. "
      "torch.quantize_per_channel(x.cpu(), ...), and move the dequantized result back with .to('npu').");
}

// An integer tensor over a quantized tensor's storage, with its geometry:
// what moves its values (copies between devices, int_repr).
at::Tensor integer_view(const at::Tensor& q) {
  const at::ScalarType underlying = c10::toUnderlying(q.scalar_type());
  return at::empty({0}, q.options().dtype(underlying).memory_format(c10::nullopt))
      .set_(q.storage(), q.storage_offset(), q.sizes(), q.strides());
}

// The host copies of a per-channel quantizer's parameters, for CPU aliases
// (the quantizer of an npu tensor may hold npu tensors, as CUDA's does).
struct HostQParams {
  at::QScheme qscheme;
  double scale = 1.0;
  int64_t zero_point = 0;
  at::Tensor scales;
  at::Tensor zero_points;
  int64_t axis = 0;
};

HostQParams host_qparams(const at::Tensor& q) {
  HostQParams p;
  p.qscheme = q.qscheme();
  if (p.qscheme == at::kPerTensorAffine || p.qscheme == at::kPerTensorSymmetric) {
    p.scale = q.q_scale();
    p.zero_point = q.q_zero_point();
  } else {
    p.scales = q.q_per_channel_scales().cpu();
    p.zero_points = q.q_per_channel_zero_points().cpu();
    p.axis = q.q_per_channel_axis();
  }
  return p;
}

// A contiguous npu tensor seen as a CPU tensor over the same memory (only
// dereferenced inside device work).
at::Tensor float_alias(const at::Tensor& t) {
  return at::from_blob(c10_npu::host_access(t.data_ptr()), t.sizes(), t.strides(),
                       t.options().device(c10::kCPU));
}

// A contiguous quantized npu tensor seen as a quantized CPU tensor over the
// same memory, with the host copies of its quantizer's parameters.
at::Tensor quantized_alias(const at::Tensor& q, const HostQParams& p) {
  void* data = c10_npu::host_access(q.data_ptr());
  const auto options = at::TensorOptions().dtype(q.scalar_type()).device(c10::kCPU);
  const auto no_delete = [](void*) {};
  if (p.qscheme == at::kPerTensorAffine || p.qscheme == at::kPerTensorSymmetric) {
    return at::from_blob_quantized_per_tensor_affine(data, q.sizes(), q.strides(), no_delete,
                                                     static_cast<float>(p.scale), p.zero_point, options);
  }
  return at::from_blob_quantized_per_channel_affine(data, q.sizes(), no_delete, p.scales, p.zero_points, p.axis,
                                                    options);
}

// Runs `body(float_alias, quantized_alias)` as device work on the current
// stream of `q`'s device. `reads_float` says which side it reads.
template <typename Body>
void launch_quantization(const char* name, const at::Tensor& real, const at::Tensor& q, bool reads_float,
                         Body body) {
  const c10_npu::NPUGuard guard(q.device());
  const c10_npu::NPUStream stream = c10_npu::getCurrentNPUStream(q.device().index());
  if (real.numel() == 0) {
    return;
  }
  c10_npu::WorkAccessScope accesses;
  if (C10_UNLIKELY(accesses.active())) {
    accesses.add(real, !reads_float);
    accesses.add(q, reads_float);
  }
  const HostQParams params = host_qparams(q);
  c10_npu::launch_host_work(
      stream, name,
      [r = float_alias(real), qa = quantized_alias(q, params), params, body]() mutable { body(r, qa, params); },
      capture_launch_site());
}

// The CPU's checks of a quantizing call, on an empty CPU tensor (one
// element per channel along `axis` for per-channel calls): raises the CPU's
// error at the call.
at::Tensor dry_run_input(const at::Tensor& self, int64_t axis = -1) {
  std::vector<int64_t> sizes(self.dim(), 1);
  if (axis >= 0 && axis < self.dim()) {
    sizes[axis] = self.size(axis);
  } else if (!sizes.empty()) {
    sizes[0] = 0;
  } else {
    return at::empty({}, self.options().device(c10::kCPU));
  }
  return at::zeros(sizes, self.options().device(c10::kCPU));
}

// An npu quantized tensor shaped like `self` for `quantizer`, in self's
// suggested memory format (as the CPU's quantizers make theirs).
at::Tensor new_npu_qtensor(const at::Tensor& self, const at::QuantizerPtr& quantizer) {
  check_not_sub_byte(quantizer->scalar_type());
  return at::new_qtensor(
      self.sizes(),
      self.options().dtype(quantizer->scalar_type()).memory_format(self.suggest_memory_format()), quantizer);
}

at::Tensor quantize_with(const at::Tensor& self, const at::QuantizerPtr& quantizer) {
  at::Tensor q = new_npu_qtensor(self, quantizer);
  const at::Tensor input = self.contiguous(self.suggest_memory_format());
  launch_quantization("quantize", input, q, /*reads_float=*/true,
                      [](at::Tensor& r, at::Tensor& qa, const HostQParams& p) {
                        switch (p.qscheme) {
                          case at::kPerTensorAffine:
                          case at::kPerTensorSymmetric:
                            at::native::quantize_tensor_per_tensor_affine(r, qa, p.scale, p.zero_point);
                            break;
                          case at::kPerChannelAffineFloatQParams:
                            at::native::quantize_tensor_per_channel_float_qparams(r, qa, p.scales, p.zero_points,
                                                                                  p.axis);
                            break;
                          default:
                            at::native::quantize_tensor_per_channel_affine(r, qa, p.scales, p.zero_points, p.axis);
                        }
                      });
  return q;
}

at::Tensor npu_quantize_per_tensor(const at::Tensor& self, double scale, int64_t zero_point, at::ScalarType dtype) {
  const c10_npu::NPUGuard guard(self.device());
  at::quantize_per_tensor(dry_run_input(self), scale, zero_point, dtype);
  return quantize_with(self, at::make_per_tensor_affine_quantizer(scale, zero_point, dtype));
}

at::Tensor npu_quantize_per_tensor_tensor_qparams(const at::Tensor& self, const at::Tensor& scale,
                                              const at::Tensor& zero_point, at::ScalarType dtype) {
  // As the CPU and CUDA: the parameters are read on the host.
  return npu_quantize_per_tensor(self, scale.item().toDouble(), zero_point.item().toLong(), dtype);
}

std::vector<at::Tensor> npu_quantize_per_tensor_list(at::TensorList tensors, const at::Tensor& scales,
                                                 const at::Tensor& zero_points, at::ScalarType dtype) {
  const at::Tensor host_scales = scales.cpu().to(at::kDouble);
  const at::Tensor host_zero_points = zero_points.cpu().to(at::kLong);
  TORCH_CHECK(host_scales.numel() == static_cast<int64_t>(tensors.size()) &&
                  host_zero_points.numel() == static_cast<int64_t>(tensors.size()),
              "quantize_per_tensor: expected one scale and one zero point per tensor, got ", host_scales.numel(),
              " scales and ", host_zero_points.numel(), " zero points for ", tensors.size(), " tensors");
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    out.push_back(npu_quantize_per_tensor(tensors[i], host_scales[i].item<double>(), host_zero_points[i].item<int64_t>(),
                                      dtype));
  }
  return out;
}

at::Tensor npu_quantize_per_tensor_dynamic(const at::Tensor& self, at::ScalarType dtype, bool reduce_range) {
  // The CPU chooses the parameters from the input's minimum and maximum
  // alone: the same choice from those two values, read on the host.
  const at::Tensor extremes = at::stack({self.min(), self.max()}).cpu();
  const at::Tensor choice = at::quantize_per_tensor_dynamic(extremes, dtype, reduce_range);
  return npu_quantize_per_tensor(self, choice.q_scale(), choice.q_zero_point(), dtype);
}

at::Tensor npu_quantize_per_channel(const at::Tensor& self, const at::Tensor& scales, const at::Tensor& zero_points,
                                int64_t axis, at::ScalarType dtype) {
  const c10_npu::NPUGuard guard(self.device());
  at::quantize_per_channel(dry_run_input(self, axis), scales.cpu(), zero_points.cpu(), axis, dtype);
  return quantize_with(self, at::make_per_channel_affine_quantizer(scales, zero_points, axis, dtype));
}

at::Tensor npu_dequantize(const at::Tensor& q) {
  const c10_npu::NPUGuard guard(q.device());
  at::Tensor real =
      at::empty(q.sizes(), q.options().dtype(at::kFloat).memory_format(q.suggest_memory_format()));
  const at::Tensor contiguous = q.contiguous(q.suggest_memory_format());
  launch_quantization("dequantize", real, contiguous, /*reads_float=*/false,
                      [](at::Tensor& r, at::Tensor& qa, const HostQParams& p) {
                        switch (p.qscheme) {
                          case at::kPerTensorAffine:
                          case at::kPerTensorSymmetric:
                            at::native::dequantize_tensor_per_tensor_affine(qa, r, p.scale, p.zero_point);
                            break;
                          case at::kPerChannelAffineFloatQParams:
                            at::native::dequantize_tensor_per_channel_float_qparams(qa, r, p.scales, p.zero_points,
                                                                                    p.axis);
                            break;
                          default:
                            at::native::dequantize_tensor_per_channel_affine(qa, r, p.scales, p.zero_points, p.axis);
                        }
                      });
  return real;
}

std::vector<at::Tensor> npu_dequantize_list(at::TensorList tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) {
    out.push_back(t.dequantize());
  }
  return out;
}

at::Tensor npu_int_repr(const at::Tensor& q) {
  const c10_npu::NPUGuard guard(q.device());
  at::Tensor out = at::empty(
      q.sizes(), q.options().dtype(c10::toUnderlying(q.scalar_type())).memory_format(q.suggest_memory_format()));
  out.copy_(integer_view(q));
  return out;
}

at::Tensor npu_make_per_tensor_quantized_tensor(const at::Tensor& self, double scale, int64_t zero_point) {
  const c10_npu::NPUGuard guard(self.device());
  at::_make_per_tensor_quantized_tensor(dry_run_input(self), scale, zero_point);
  at::Tensor q = at::_empty_affine_quantized(
      self.sizes(), self.options().dtype(c10::toQIntType(self.scalar_type())), scale, zero_point,
      self.suggest_memory_format());
  integer_view(q).copy_(self);
  return q;
}

at::Tensor npu_make_per_channel_quantized_tensor(const at::Tensor& self, const at::Tensor& scales,
                                             const at::Tensor& zero_points, int64_t axis) {
  const c10_npu::NPUGuard guard(self.device());
  at::_make_per_channel_quantized_tensor(dry_run_input(self, axis), scales.cpu(), zero_points.cpu(), axis);
  at::Tensor q = at::_empty_per_channel_affine_quantized(
      self.sizes(), scales, zero_points, axis, self.options().dtype(c10::toQIntType(self.scalar_type())),
      self.suggest_memory_format());
  integer_view(q).copy_(self);
  return q;
}

// copy_ with a quantized tensor on either side (one of them on npu), with
// the CPU's rules: quantized from quantized takes the source's quantizer;
// quantized from float quantizes with the destination's parameters.
at::Tensor& quantized_copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  const c10_npu::OptionalNPUGuard guard(self.device().is_privateuseone() ? self.device() : src.device());
  TORCH_CHECK(self.is_quantized(),
              "Copying from quantized Tensor to non-quantized Tensor is not allowed, please use dequantize to get a "
              "float Tensor from a quantized Tensor");
  if (!src.is_quantized()) {
    TORCH_CHECK(src.scalar_type() == at::kFloat, "Quantized copy only works with kFloat as source Tensor");
    TORCH_CHECK(self.is_contiguous() && src.is_contiguous(), "Quantized copy only works with contiguous Tensors");
    TORCH_CHECK(self.sizes().equals(src.sizes()), "Quantized copy only works with Tensors with the same shape");
    const at::Tensor q = at::quantize_per_tensor(src.to(self.device()), self.q_scale(), self.q_zero_point(),
                                                 self.scalar_type());
    integer_view(self).copy_(integer_view(q), non_blocking);
    return self;
  }
  TORCH_CHECK(self.qscheme() == src.qscheme(), "Quantized Copy only works with same qscheme");
  TORCH_CHECK(self.scalar_type() == src.scalar_type(), "Quantized Copy needs the same dtype, got ",
              self.scalar_type(), " and ", src.scalar_type());
  check_not_sub_byte(self.scalar_type());
  if (self.is_same(src)) {
    return self;
  }
  at::set_quantizer_(self, src.quantizer());
  integer_view(self).copy_(integer_view(src), non_blocking);
  return self;
}

// ATen's own quantized kernels (quantized_clone) copy through
// at::native::copy_, which hands a copy involving npu to _copy_from.
at::Tensor quantized_copy_from(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  at::Tensor out = dst;
  quantized_copy_(out, src, non_blocking);
  return out;
}

bool quantized_equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(other.is_quantized(), "torch.equal of a quantized tensor needs a quantized other, got ",
              other.scalar_type());
  if (self.qscheme() != other.qscheme() || self.scalar_type() != other.scalar_type() ||
      !self.sizes().equals(other.sizes())) {
    return false;
  }
  if (self.qscheme() == at::kPerTensorAffine) {
    if (self.q_scale() != other.q_scale() || self.q_zero_point() != other.q_zero_point()) {
      return false;
    }
  } else if (!at::equal(self.q_per_channel_scales().cpu(), other.q_per_channel_scales().cpu()) ||
             !at::equal(self.q_per_channel_zero_points().cpu(), other.q_per_channel_zero_points().cpu()) ||
             self.q_per_channel_axis() != other.q_per_channel_axis()) {
    return false;
  }
  return at::equal(integer_view(self), integer_view(other.to(self.device())));
}

// ATen's kernels that make a QTensorImpl allocate on the current device
// (at::new_qtensor): they run under a guard of the device they are asked for.
c10::Device requested_device(std::optional<c10::Device> device) {
  return device.has_value() && device->is_privateuseone() ? *device : c10::Device(c10::DeviceType::PrivateUse1);
}

at::Tensor empty_affine_quantized_on_device(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                            std::optional<at::Layout> layout, std::optional<c10::Device> device,
                                            std::optional<bool> pin_memory, double scale, int64_t zero_point,
                                            std::optional<c10::MemoryFormat> memory_format) {
  const c10_npu::OptionalNPUGuard guard(requested_device(device));
  return at::native::empty_affine_quantized(size, dtype, layout, device, pin_memory, scale, zero_point,
                                            memory_format);
}

at::Tensor empty_per_channel_affine_quantized_on_device(
    at::IntArrayRef size, const at::Tensor& scales, const at::Tensor& zero_points, int64_t axis,
    std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout, std::optional<c10::Device> device,
    std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  const c10_npu::OptionalNPUGuard guard(requested_device(device));
  return at::native::empty_per_channel_affine_quantized(size, scales, zero_points, axis, dtype, layout, device,
                                                        pin_memory, memory_format);
}

at::Tensor empty_unknown_quantized_on_device(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                             std::optional<at::Layout> layout, std::optional<c10::Device> device,
                                             std::optional<bool> pin_memory,
                                             std::optional<c10::MemoryFormat> memory_format) {
  const c10_npu::OptionalNPUGuard guard(requested_device(device));
  return at::native::empty_unknown_quantized(size, dtype, layout, device, pin_memory, memory_format);
}

at::Tensor empty_strided_unknown_quantized_on_device(at::IntArrayRef size, at::IntArrayRef stride,
                                                     std::optional<at::ScalarType> dtype,
                                                     std::optional<at::Layout> layout,
                                                     std::optional<c10::Device> device,
                                                     std::optional<bool> pin_memory) {
  const c10_npu::OptionalNPUGuard guard(requested_device(device));
  return at::native::empty_strided_unknown_quantized(size, stride, dtype, layout, device, pin_memory);
}

at::Tensor quantized_clone_on_device(const at::Tensor& self, std::optional<c10::MemoryFormat> memory_format) {
  const c10_npu::NPUGuard guard(self.device());
  return at::native::quantized_clone(self, memory_format);
}

// flip moves integers only: the npu's flip of the integer view, into a
// tensor with self's quantizer and memory format (the CPU's flip writes
// into empty_like(self), which keeps both). The dim checks are the CPU's
// (dim_list_to_bitset). The CPU refuses a per-channel tensor when a flipped
// dim has more than one element (its TensorIterator cannot restride the
// output), and so does this, before anything is queued.
at::Tensor quantized_flip_on_device(const at::Tensor& self, at::IntArrayRef dims) {
  const c10_npu::NPUGuard guard(self.device());
  check_not_sub_byte(self.scalar_type());
  const auto flipped_dims = at::dim_list_to_bitset(dims, self.dim());
  if (self.qscheme() != at::kPerTensorAffine && self.qscheme() != at::kPerTensorSymmetric && self.numel() > 1) {
    for (int64_t d = 0; d < self.dim(); ++d) {
      TORCH_CHECK(!(flipped_dims[d] && self.size(d) > 1 && self.stride(d) != 0),
                  "Setting strides is possible only on uniformly quantized tensor");
    }
  }
  const at::Tensor flipped = at::flip(integer_view(self), dims);
  at::Tensor out = new_npu_qtensor(self, self.quantizer());
  integer_view(out).copy_(flipped);
  return out;
}

[[noreturn]] void refuse_quantized(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "npu has no quantized kernel for ", op.schema().name(),
      ": quantized npu tensors can be made (quantize_per_tensor, quantize_per_channel), dequantized, viewed, "
      "copied and moved (.cpu(), .to('npu')), not computed with. Dequantize first (q.dequantize()) and run the "
      "float op on npu, or run the quantized op on the CPU (q.cpu()).");
}

} // namespace

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_quantized>());
}

// Quantizing an npu float tensor dispatches on its input.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("quantize_per_tensor", TORCH_FN(npu_quantize_per_tensor));
  m.impl("quantize_per_tensor.tensor_qparams", TORCH_FN(npu_quantize_per_tensor_tensor_qparams));
  m.impl("quantize_per_tensor.tensors", TORCH_FN(npu_quantize_per_tensor_list));
  m.impl("quantize_per_tensor_dynamic", TORCH_FN(npu_quantize_per_tensor_dynamic));
  m.impl("quantize_per_channel", TORCH_FN(npu_quantize_per_channel));
  m.impl("_make_per_tensor_quantized_tensor", TORCH_FN(npu_make_per_tensor_quantized_tensor));
  m.impl("_make_per_channel_quantized_tensor", TORCH_FN(npu_make_per_channel_quantized_tensor));
}

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  // What touches values.
  m.impl("dequantize.self", TORCH_FN(npu_dequantize));
  m.impl("dequantize.tensors", TORCH_FN(npu_dequantize_list));
  m.impl("int_repr", TORCH_FN(npu_int_repr));
  m.impl("copy_", TORCH_FN(quantized_copy_));
  m.impl("_copy_from", TORCH_FN(quantized_copy_from));
  m.impl("equal", TORCH_FN(quantized_equal));
  m.impl("flip", TORCH_FN(quantized_flip_on_device));
  // ATen's device-independent quantized kernels: they read the quantizer
  // or make QTensorImpls (new_qtensor allocates with npu's allocator).
  m.impl("q_scale", TORCH_FN(at::native::q_scale_quant));
  m.impl("q_zero_point", TORCH_FN(at::native::q_zero_point_quant));
  m.impl("qscheme", TORCH_FN(at::native::qscheme_quant));
  m.impl("q_per_channel_scales", TORCH_FN(at::native::q_per_channel_scales));
  m.impl("q_per_channel_zero_points", TORCH_FN(at::native::q_per_channel_zero_points));
  m.impl("q_per_channel_axis", TORCH_FN(at::native::q_per_channel_axis));
  m.impl("_empty_affine_quantized", TORCH_FN(empty_affine_quantized_on_device));
  m.impl("_empty_per_channel_affine_quantized", TORCH_FN(empty_per_channel_affine_quantized_on_device));
  m.impl("empty_quantized", TORCH_FN(at::native::empty_quantized));
  m.impl("empty.memory_format", TORCH_FN(empty_unknown_quantized_on_device));
  m.impl("empty_strided", TORCH_FN(empty_strided_unknown_quantized_on_device));
  m.impl("clone", TORCH_FN(quantized_clone_on_device));
  m.impl("fill_.Scalar", static_cast<at::Tensor& (*)(at::Tensor&, const at::Scalar&)>(&at::native::fill_quantized_));
  m.impl("fill_.Tensor", static_cast<at::Tensor& (*)(at::Tensor&, const at::Tensor&)>(&at::native::fill_quantized_));
  // Views.
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_qtensorimpl));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("squeeze", static_cast<at::Tensor (*)(const at::Tensor&)>(&at::native::squeeze_quantized));
  m.impl("squeeze.dim", static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(&at::native::squeeze_quantized));
  m.impl("squeeze.dims",
         static_cast<at::Tensor (*)(const at::Tensor&, at::IntArrayRef)>(&at::native::squeeze_quantized));
  m.impl("unsqueeze", TORCH_FN(at::native::unsqueeze_quantized));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(at::native::set_storage_quantized_));
}

} // namespace torch_npu_ops
