#include "KernelResultLayouts.h"

#include <ATen/TensorIterator.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>

namespace torch_npu_ops {
namespace {

void restride(TensorSpec& result, c10::MemoryFormat memory_format) {
  if (!result.defined) {
    return;
  }
  const at::Tensor laid_out =
      at::empty(result.sizes, at::TensorOptions().device(c10::DeviceType::Meta).dtype(result.dtype), memory_format);
  result.strides.assign(laid_out.strides().begin(), laid_out.strides().end());
  result.storage_offset = 0;
}

at::Tensor meta_like(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::DeviceType::Meta));
}

// The strides TensorIterator gives the result of a binary op of `a` and `b`:
// the CPU kernel's.
void restride_as_tensor_iterator(TensorSpec& result, const at::Tensor& a, const at::Tensor& b) {
  if (!result.defined || !a.defined() || !b.defined() || a.layout() != c10::kStrided ||
      b.layout() != c10::kStrided) {
    return;
  }
  at::TensorIterator iter = at::TensorIteratorConfig()
                                .add_owned_output(at::Tensor())
                                .add_owned_const_input(meta_like(a))
                                .add_owned_const_input(meta_like(b))
                                .promote_inputs_to_common_dtype(true)
                                .build();
  const at::Tensor& out = iter.output(0);
  if (c10::IntArrayRef(result.sizes) == out.sizes()) {
    result.strides.assign(out.strides().begin(), out.strides().end());
    result.storage_offset = 0;
  }
}

// The strides of `result`, a result of an unbatched (4-d) 3-d pool, as the
// CPU kernel lays it out: it pools the input with a batch dimension of one,
// so an input that is channels-last-3d once unsqueezed gives results in that
// order, without the batch dimension.
void restride_unbatched_channels_last_3d(TensorSpec& result, const at::Tensor& self) {
  if (!result.defined || result.sizes.size() != 4) {
    return;
  }
  const at::Tensor batched = meta_like(self).unsqueeze(0);
  if (batched.is_contiguous() || !batched.is_contiguous(c10::MemoryFormat::ChannelsLast3d)) {
    return;
  }
  std::vector<int64_t> sizes{1};
  sizes.insert(sizes.end(), result.sizes.begin(), result.sizes.end());
  const at::Tensor laid_out = at::empty(
      sizes, at::TensorOptions().device(c10::DeviceType::Meta).dtype(result.dtype), c10::MemoryFormat::ChannelsLast3d);
  result.strides.assign(laid_out.strides().begin() + 1, laid_out.strides().end());
  result.storage_offset = 0;
}

} // namespace

void lay_out_as_the_cpu_kernel(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                               OutputSpec& spec) {
  // Note [Results laid out as the CPU kernel lays them out]
  if (args.empty() || !args[0].isTensor() || spec.empty()) {
    return;
  }
  const std::string& name = schema.name();
  const std::string& overload = schema.overload_name();
  const at::Tensor& self = args[0].toTensor();
  if (overload == "Tensor" && name == "aten::copysign" && args.size() >= 2 && args[1].isTensor() &&
      spec[0].size() == 1) {
    restride_as_tensor_iterator(spec[0][0], self, args[1].toTensor());
    return;
  }
  if (!overload.empty()) {
    return; // the functional overloads only: an out= keeps the out's layout
  }
  if (name == "aten::floor_divide" && args.size() >= 2 && args[1].isTensor() && spec[0].size() == 1) {
    restride_as_tensor_iterator(spec[0][0], self, args[1].toTensor());
  } else if (name == "aten::native_channel_shuffle" || name == "aten::channel_shuffle") {
    if (self.numel() > 0 && spec[0].size() == 1) { // an empty input: the CPU returns an alias
      restride(spec[0][0], self.suggest_memory_format());
    }
  } else if (name == "aten::max_unpool2d") {
    if (self.dim() == 4 && spec[0].size() == 1) {
      restride(spec[0][0], self.suggest_memory_format());
    }
  } else if (name == "aten::max_pool3d_with_indices") {
    if (self.dim() == 4) {
      for (auto& results : spec) {
        for (TensorSpec& result : results) {
          restride_unbatched_channels_last_3d(result, self);
        }
      }
    }
  } else if (name == "aten::log_sigmoid_forward" || name == "aten::rrelu_with_noise") {
    for (auto& results : spec) {
      for (TensorSpec& result : results) {
        restride(result, c10::MemoryFormat::Contiguous);
      }
    }
  }
}

} // namespace torch_npu_ops
