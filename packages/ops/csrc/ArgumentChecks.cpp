// Argument checks of CPU kernels that their meta kernels lack and that call
// signatures cannot foresee, run on the host at the call.
//
// Note [Errors at the call] raises a CPU kernel's argument errors at the
// call by waiting for the first call of each signature. A check that
// compares a size with a limit is invisible to the signature (it leaves
// sizes out), so once a signature ran cleanly such an error would surface
// at a later synchronization. The few such checks are repeated here, before
// the op goes on to the generic executor, with the CPU's messages; where an
// earlier check of the CPU kernel would fail first, the kernel is left to
// raise that one.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/FractionalMaxPooling.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/isfinite.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdint>

#include "DeviceOpExecutor.h"

namespace torch_npu_ops {
namespace {

// Argument `index` of `op`'s call on top of `stack` (a boxed kernel's view).
const c10::IValue& argument(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t index) {
  return stack[stack.size() - op.schema().arguments().size() + index];
}

// multinomial (and .out): the CPU kernel refuses more categories than a
// float32 counts exactly, and more samples than categories without
// replacement; the meta kernel checks neither.
void multinomial_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::IValue& self = argument(op, *stack, 0);
  const c10::IValue& num_samples = argument(op, *stack, 1);
  const c10::IValue& replacement = argument(op, *stack, 2);
  if (self.isTensor() && num_samples.isInt() && replacement.isBool()) {
    const at::Tensor& probabilities = self.toTensor();
    const int64_t n_sample = num_samples.toInt();
    if ((probabilities.dim() == 1 || probabilities.dim() == 2) && at::isFloatingType(probabilities.scalar_type()) &&
        n_sample > 0) {
      const int64_t n_categories = probabilities.size(-1);
      TORCH_CHECK(replacement.toBool() || n_sample <= n_categories,
                  "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
      constexpr int64_t kFloat32MaxConsecutiveInt = int64_t{1} << 24;
      TORCH_CHECK(n_categories <= kFloat32MaxConsecutiveInt, "number of categories cannot exceed 2^24");
    }
  }
  run_on_npu(op, stack);
}

// randperm.generator_out: the CPU kernel refuses an n that its result's
// dtype cannot hold (uint8 past 256) or, for floating types, count exactly;
// the signature keys n by its sign only. The CPU's own check, given a CPU
// tensor of the out's dtype (it makes a scalar of that dtype). randperm and
// randperm.out are composite and reach this overload; registering them here
// would bypass the composite, and with it the npu generator it passes on.
void randperm_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::IValue& n = argument(op, *stack, 0);
  const c10::IValue& out = stack->back();
  if (n.isInt() && n.toInt() >= 0 && out.isTensor() && out.toTensor().defined()) {
    const at::Tensor probe = at::empty({0}, at::TensorOptions().dtype(out.toTensor().scalar_type()));
    at::native::check_supported_max_int_with_precision(n.toInt(), probe);
  }
  run_on_npu(op, stack);
}

// linalg_eig (and .out): the CPU and CUDA kernels first refuse an input with
// infs or NaNs, reading the check's result on the host (CUDA synchronizes
// for it). The check depends on the values, so once a signature ran cleanly
// it surfaced at a later synchronization and spoilt the next test's op; the
// same check is made here, on npu, with the host waiting as on CUDA.
void linalg_eig_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::IValue& self = argument(op, *stack, 0);
  if (self.isTensor() && self.toTensor().defined()) {
    TORCH_CHECK(at::isfinite(self.toTensor()).all().item<bool>(),
                "torch.linalg.eig: input tensor should not contain infs or NaNs.");
  }
  run_on_npu(op, stack);
}

// fractional_max_pool3d (and .output): the CPU kernel checks _random_samples
// against the input (its batch, its channels, three samples a plane) by
// size; the Python meta kernel, active once torch._dynamo is imported, does
// not, and the signature leaves sizes out. ATen's own check, made here where
// the CPU kernel makes it: after the input's rank and sizes passed its
// meta function's checks.
void fractional_max_pool3d_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::IValue& self = argument(op, *stack, 0);
  const c10::IValue& random_samples = argument(op, *stack, 3);
  if (self.isTensor() && random_samples.isTensor()) {
    const at::Tensor& input = self.toTensor();
    const at::Tensor& samples = random_samples.toTensor();
    bool planes = input.dim() == 4 || input.dim() == 5;
    for (int64_t d = input.dim() - 4; planes && d < input.dim(); ++d) {
      planes = input.size(d) > 0; // else the CPU's meta function raises first
    }
    if (planes && samples.defined()) {
      at::native::fractional_max_pool_check_shape</*ndim=*/3>(input, samples);
    }
  }
  run_on_npu(op, stack);
}

// embedding_dense_backward: the CPU (and CUDA) kernel views the gradient as
// one row per index, so a gradient whose size does not match the indices is
// refused by that view; the Python meta kernel does not check it, and the
// signature leaves sizes out. The same view, of a meta tensor, gives the
// CPU's error at the call (after the kernel's check of the indices' dtype).
void embedding_dense_backward_on_npu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::IValue& grad = argument(op, *stack, 0);
  const c10::IValue& indices = argument(op, *stack, 1);
  if (grad.isTensor() && indices.isTensor() && grad.toTensor().defined() && indices.toTensor().defined() &&
      grad.toTensor().dim() > 0 &&
      (indices.toTensor().scalar_type() == at::kLong || indices.toTensor().scalar_type() == at::kInt)) {
    const at::Tensor& g = grad.toTensor();
    at::empty(g.sizes(), g.options().device(c10::DeviceType::Meta)).view({indices.toTensor().numel(), g.size(-1)});
  }
  run_on_npu(op, stack);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_eig", torch::CppFunction::makeFromBoxedFunction<&linalg_eig_on_npu>());
  m.impl("linalg_eig.out", torch::CppFunction::makeFromBoxedFunction<&linalg_eig_on_npu>());
  m.impl("randperm.generator_out", torch::CppFunction::makeFromBoxedFunction<&randperm_on_npu>());
  m.impl("multinomial", torch::CppFunction::makeFromBoxedFunction<&multinomial_on_npu>());
  m.impl("multinomial.out", torch::CppFunction::makeFromBoxedFunction<&multinomial_on_npu>());
  m.impl("embedding_dense_backward",
         torch::CppFunction::makeFromBoxedFunction<&embedding_dense_backward_on_npu>());
  m.impl("fractional_max_pool3d", torch::CppFunction::makeFromBoxedFunction<&fractional_max_pool3d_on_npu>());
  m.impl("fractional_max_pool3d.output",
         torch::CppFunction::makeFromBoxedFunction<&fractional_max_pool3d_on_npu>());
}

} // namespace torch_npu_ops
