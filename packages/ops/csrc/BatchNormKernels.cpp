// A dedicated npu kernel for native_batch_norm.
//
// Its meta kernel follows CUDA's (float32 statistics for reduced-precision
// inputs, statistics even in evaluation), which disagrees with the CPU
// kernel, so the generic executor had to run evaluation and bf16/fp16 batch
// norms synchronously. This kernel allocates exactly the outputs the CPU
// kernel allocates (aten/src/ATen/native/Normalization.cpp, batch_norm_cpu)
// and queues the CPU's out= kernel, which writes into them (and updates the
// running statistics in device memory) asynchronously.
#include <ATen/core/Tensor.h>
#include <ATen/native/cpu/mixed_data_type.h>
#include <ATen/ops/native_batch_norm_cpu_dispatch.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <ATen/ops/mean.h>

#include "FastPath.h"

namespace torch_npu_ops {
namespace {

struct BatchNormCpu {
  static void call(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                   const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                   const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps,
                   at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd) {
    at::cpu::native_batch_norm_outf(
        input, weight, bias, running_mean, running_var, training, momentum, eps, out, save_mean, save_invstd);
  }
};

bool is_contiguous_in_any_format(const at::Tensor& t) {
  return t.is_contiguous() || t.is_contiguous(at::MemoryFormat::ChannelsLast) ||
      t.is_contiguous(at::MemoryFormat::ChannelsLast3d);
}

// A channels-last contiguous tensor may suggest Contiguous (pytorch#63224).
at::MemoryFormat suggest_memory_format_contig(const at::Tensor& t) {
  return t.is_contiguous() ? at::MemoryFormat::Contiguous
                           : (t.is_contiguous(at::MemoryFormat::ChannelsLast3d) ? at::MemoryFormat::ChannelsLast3d
                                                                                 : at::MemoryFormat::ChannelsLast);
}

// at::empty_like(t, format) on npu, without the dispatcher.
at::Tensor empty_like(const at::Tensor& t, at::MemoryFormat format) {
  if (format == at::MemoryFormat::Preserve) {
    format = t.suggest_memory_format();
  }
  return fast::allocate_output(t.sizes(), {}, t.options().memory_format(format));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& self, const std::optional<at::Tensor>& weight_opt, const std::optional<at::Tensor>& bias_opt,
    const std::optional<at::Tensor>& running_mean_opt, const std::optional<at::Tensor>& running_var_opt,
    bool train, double momentum, double eps) {
  const auto device = fast::fast_path_device(self, weight_opt, bias_opt, running_mean_opt, running_var_opt);
  if (!device.has_value() || !self.device().is_privateuseone() || self.dim() < 2 ||
      fast::host_scalars_refused<at::_ops::native_batch_norm>(weight_opt, bias_opt, running_mean_opt,
                                                               running_var_opt)) {
    return at::native::call_fallback_fn<&run_on_npu, at::_ops::native_batch_norm>::call(
        self, weight_opt, bias_opt, running_mean_opt, running_var_opt, train, momentum, eps);
  }
  const fast::DeviceScope scope(*device);
  const at::Tensor weight = weight_opt.value_or(at::Tensor());
  const at::Tensor bias = bias_opt.value_or(at::Tensor());
  const at::Tensor running_mean = running_mean_opt.value_or(at::Tensor());
  const at::Tensor running_var = running_var_opt.value_or(at::Tensor());

  // The argument checks of batch_norm_cpu and batch_norm_cpu_out that do not
  // need the data, raised at the call as on the CPU.
  if (!train) {
    TORCH_CHECK_VALUE(running_mean.defined(), "running_mean must be defined in evaluation mode");
    TORCH_CHECK_VALUE(running_var.defined(), "running_var must be defined in evaluation mode");
  }
  TORCH_CHECK_VALUE(running_mean.defined() == running_var.defined(),
                    "running_mean and running_var must either both be None or neither be None");
  const bool mixed_type = at::native::is_mixed_type(self, weight, bias, running_mean, running_var);
  if (mixed_type) {
    at::native::check_mixed_data_type(self, weight, bias, running_mean, running_var);
  }

  // The outputs, as batch_norm_cpu allocates them.
  const bool all_contiguous = is_contiguous_in_any_format(self) && (!weight.defined() || weight.is_contiguous()) &&
      (!bias.defined() || bias.is_contiguous()) && running_mean.is_contiguous() && running_var.is_contiguous();
  at::Tensor output =
      empty_like(self, all_contiguous ? suggest_memory_format_contig(self) : self.suggest_memory_format());
  const auto stat_options = mixed_type ? self.options().dtype(at::kFloat) : self.options();
  at::Tensor save_mean;
  at::Tensor save_var;
  if (!train) {
    save_mean = fast::allocate_output({0}, {}, stat_options);
    save_var = fast::allocate_output({0}, {}, stat_options);
  } else {
    if (is_contiguous_in_any_format(self)) {
      save_mean = fast::allocate_output({self.size(1)}, {}, stat_options);
    } else {
      c10::DimVector reduce_dims(self.dim() - 1);
      reduce_dims[0] = 0;
      for (int64_t i = 2; i < self.dim(); ++i) {
        reduce_dims[i - 1] = i;
      }
      save_mean = mixed_type ? at::mean(self, reduce_dims, false, at::kFloat) : at::mean(self, reduce_dims, false);
    }
    save_var = fast::allocate_output({self.size(1)}, {}, stat_options);
  }
  // Writes output, save_mean and save_var, and in training the running
  // statistics.
  const fast::WrittenArgs written = (fast::WrittenArgs{0b111} << 8) | (train ? fast::WrittenArgs{0b11} << 3 : 0);
  fast::launch_writing<BatchNormCpu>(scope.stream(), "aten::native_batch_norm", written, self, weight_opt, bias_opt,
                                     running_mean_opt, running_var_opt, train, momentum, eps, output, save_mean,
                                     save_var);
  return {std::move(output), std::move(save_mean), std::move(save_var)};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(native_batch_norm));
}

} // namespace
} // namespace torch_npu_ops
