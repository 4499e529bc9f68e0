#include "KernelArguments.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "CallVerification.h"
#include "CpuAliases.h"
#include "IValueTensors.h"
#include "SharedStorages.h"
#include "npu/NPUGenerator.h"
#include "npu/NPUGraphsUtils.h"

namespace torch_npu_ops {
namespace {

using c10::IValue;

uint64_t mix_seed(uint64_t seed, uint64_t offset) {
  // splitmix64 of (seed, offset): a distinct, reproducible CPU seed for each
  // slice of the npu generator's counter space.
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (offset + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

bool is_generator_argument(const c10::Argument& argument) {
  const auto& type = argument.real_type();
  return type->kind() == c10::TypeKind::GeneratorType ||
      (type->kind() == c10::TypeKind::OptionalType &&
       type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType);
}

// The CPU generator of a random kernel captured into a graph (Note [Random
// numbers in captured graphs], core's NPUGenerator.h): never used itself;
// each run of the work item clones it (as_stack), and the clone is seeded
// from the seed and base offset of the replay that runs, plus the kernel's
// offset within the graph.
class ReplaySeededCPUGenerator final : public at::CPUGeneratorImpl {
 public:
  ReplaySeededCPUGenerator(
      std::shared_ptr<const c10_npu::NPUGeneratorState::ReplayBase> replay_base, uint64_t offset_in_graph)
      : replay_base_(std::move(replay_base)), offset_in_graph_(offset_in_graph) {}

 private:
  at::CPUGeneratorImpl* clone_impl() const override {
    const uint64_t seed = replay_base_->seed.load(std::memory_order_relaxed);
    const uint64_t base = replay_base_->offset.load(std::memory_order_relaxed);
    return new at::CPUGeneratorImpl(mix_seed(seed, base + offset_in_graph_));
  }

  std::shared_ptr<const c10_npu::NPUGeneratorState::ReplayBase> replay_base_;
  uint64_t offset_in_graph_;
};

// The CPU generator the kernel gets for generator argument `arg` (None: the
// device's default npu generator): seeded from a slice of the npu
// generator's counter space as large as the call's `numel` elements, which
// advances the npu generator as a kernel of the device would.
at::Generator cpu_generator(
    const c10::FunctionSchema& schema, const IValue& arg, c10::Device device, int64_t numel) {
  at::Generator npu_generator = arg.isNone()
      ? c10_npu::getDefaultNPUGenerator(device.index())
      : arg.toGenerator();
  TORCH_CHECK(
      npu_generator.device().is_privateuseone(), "Expected a generator of device 'npu' for ",
      schema.name(), ", got one of ", npu_generator.device());
  const bool capturing =
      c10_npu::stream_capture_status(c10_npu::getCurrentNPUStream(device.index())) != c10_npu::CaptureStatus::None;
  auto* impl = npu_generator.get<c10_npu::NPUGeneratorImpl>();
  c10_npu::PhiloxInputs inputs;
  {
    std::lock_guard<std::mutex> lock(npu_generator.mutex());
    inputs = impl->philox_inputs(static_cast<uint64_t>(std::max<int64_t>(numel, 1)), capturing);
  }
  if (inputs.replay_base != nullptr) {
    return at::make_generator<ReplaySeededCPUGenerator>(std::move(inputs.replay_base), inputs.offset);
  }
  return at::detail::createCPUGenerator(mix_seed(inputs.seed, inputs.offset));
}

} // namespace

std::vector<IValue> pop_arguments(const c10::FunctionSchema& schema, torch::jit::Stack* stack) {
  const auto num_args = static_cast<std::ptrdiff_t>(schema.arguments().size());
  std::vector<IValue> args(std::make_move_iterator(stack->end() - num_args), std::make_move_iterator(stack->end()));
  stack->erase(stack->end() - num_args, stack->end());
  return args;
}

std::vector<IValue> cpu_arguments(
    const c10::FunctionSchema& schema, const std::vector<IValue>& args, c10::Device device,
    bool resizable_shared) {
  int64_t numel = 0;
  for (const auto& arg : args) {
    for_each_tensor(arg, [&](const at::Tensor& t) { numel += t.defined() ? t.numel() : 0; });
  }
  // Arguments that share npu memory share it on the CPU too, so that the
  // kernel's overlap checks see it (SharedStorages.h).
  std::optional<SharedStorages> shared;
  if (shares_npu_storage(args)) {
    shared.emplace(c10::DeviceType::CPU, resizable_shared);
  }
  std::unordered_map<const c10::TensorImpl*, at::Tensor> same_tensor;
  std::vector<IValue> out;
  out.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const IValue& arg = args[i];
    if (is_generator_argument(schema.arguments()[i])) {
      out.emplace_back(cpu_generator(schema, arg, device, numel));
      continue;
    }
    if (arg.isDevice() && arg.toDevice().is_privateuseone()) {
      out.emplace_back(c10::Device(c10::DeviceType::CPU));
      continue;
    }
    out.push_back(map_tensors(arg, [&](const at::Tensor& t) -> at::Tensor {
      if (!t.defined()) {
        return t;
      }
      if (!is_npu(t)) {
        at::Tensor copy = t.clone();
        if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
          // A wrapped Python number promotes differently from a 0-dim
          // tensor (int32 x + 2.5 is float32, not float64): the copy stays one.
          copy.unsafeGetTensorImpl()->set_wrapped_number(true);
        }
        return copy;
      }
      if (!shared.has_value()) {
        return cpu_alias(t);
      }
      // The same npu tensor twice is the same CPU tensor twice: kernels
      // treat an out= that *is* an input (is_same) as full overlap, even
      // when empty.
      auto [it, fresh] = same_tensor.try_emplace(t.unsafeGetTensorImpl());
      if (fresh) {
        const bool dense = t.layout() == c10::kStrided && !t.is_nested() && t.storage().data() != nullptr;
        it->second = dense ? shared->view(t) : cpu_alias(t);
        keep_requires_grad(it->second, t);
      }
      return it->second;
    }));
  }
  return out;
}

torch::jit::Stack as_stack(const std::vector<IValue>& args, size_t count) {
  count = std::min(count, args.size());
  torch::jit::Stack stack;
  stack.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (args[i].isGenerator()) {
      stack.emplace_back(args[i].toGenerator().clone());
    } else {
      stack.push_back(args[i]);
    }
  }
  return stack;
}

namespace {

// The kind of a scalar argument (or list element), for call signatures.
uint64_t scalar_kind(const IValue& value) {
  if (value.isBool()) {
    return 1;
  }
  if (value.isInt()) {
    return 2;
  }
  if (value.isDouble()) {
    return 3;
  }
  if (value.isComplexDouble()) {
    return 4;
  }
  return 5;
}

// Whether a strided tensor is contiguous, channels-last (2d or 3d)
// contiguous, or laid out otherwise, for call signatures: CPU kernels refuse
// by layout (nll_loss2d_backward's "grad_input must be contiguous" for an
// input in channels-last order, where its zeros_like gradient keeps that
// order), so that a clean call on a contiguous tensor must not let one of
// another layout through unverified. The flags are cached in the tensor.
uint64_t memory_layout_class(const at::Tensor& t) {
  if (t.layout() != c10::kStrided || t.is_nested()) {
    return 0;
  }
  if (t.is_contiguous()) {
    return 1;
  }
  if (t.is_contiguous(at::MemoryFormat::ChannelsLast)) {
    return 2;
  }
  if (t.is_contiguous(at::MemoryFormat::ChannelsLast3d)) {
    return 3;
  }
  return 4;
}

// The memory format a CPU kernel reads off a 4-d or 5-d tensor
// (suggest_memory_format), for call signatures: with dimensions of size one
// it can differ from memory_layout_class (a tensor can be both channels-last
// and not strides-like channels-last), and kernels refuse by it (max_pool3d
// of a 4-d channels-last tensor: "Unsupported memory format").
uint64_t suggested_format_class(const at::Tensor& t) {
  if (t.layout() != c10::kStrided || t.is_nested() || (t.dim() != 4 && t.dim() != 5)) {
    return 0;
  }
  return 1 + static_cast<uint64_t>(t.suggest_memory_format());
}

// Which dimensions of an empty tensor have size 0, for call signatures:
// CPU kernels refuse by position (the pools' "Expected input to have
// non-zero size for non-batch dimensions" takes an empty batch but not an
// empty channel dimension), so that a clean call with an empty batch must
// not let one with an empty channel dimension through unverified.
uint64_t empty_dims_mask(const at::Tensor& t) {
  uint64_t mask = 0;
  const auto sizes = t.sizes();
  for (size_t d = 0; d < sizes.size() && d < 60; ++d) {
    if (sizes[d] == 0) {
      mask |= uint64_t{1} << d;
    }
  }
  return 0xE000000000000000ULL ^ mask;
}

} // namespace

uint64_t call_signature(const c10::FunctionSchema& schema, const std::vector<IValue>& args) {
  CallSignature signature(&schema);
  const std::string_view name = schema.name();
  const bool values_vary = name.starts_with("aten::_fused_") || name.starts_with("aten::_foreach_");
  // random_'s bounds are checked against the tensor's dtype by the CPU kernel
  // ("to - 1 is out of bounds for bool"): by value, so that a clean call with
  // bounds that fit does not let a later one with bounds that do not through
  // unverified. Bounds rarely change from call to call.
  const bool integers_by_value = name == "aten::random_" || name == "aten::random";
  const auto add_tensor = [&](const at::Tensor& t) {
    if (!t.defined()) {
      signature.add(0x7F);
      return;
    }
    signature.add((static_cast<uint64_t>(t.scalar_type()) << 40) | (static_cast<uint64_t>(t.layout()) << 32) |
                  (suggested_format_class(t) << 28) | (memory_layout_class(t) << 24) |
                  (static_cast<uint64_t>(t.dim()) << 1) |
                  (t.numel() == 0 ? 1 : 0));
    if (t.numel() == 0) {
      signature.add(empty_dims_mask(t));
    }
  };
  if (shares_npu_storage(args)) {
    // Overlapping arguments: a kernel may refuse them (SharedStorages.h).
    std::vector<uint32_t> pattern;
    storage_sharing_pattern(args, pattern);
    for (const uint32_t ordinal : pattern) {
      signature.add(0x5500 + ordinal);
    }
  }
  for (const IValue& arg : args) {
    if (arg.isTensor() || arg.isTensorList() || arg.isList()) {
      bool any = false;
      for_each_tensor(arg, [&](const at::Tensor& t) {
        add_tensor(t);
        any = true;
      });
      if (!any && arg.isList()) {
        // A list of non-tensors (sizes, dims, scalars): not by value, but by
        // the kinds of its elements, since a bool or complex element changes
        // what the kernel accepts (_foreach_sub refuses bools, a float
        // in-place list refuses complex scalars).
        uint64_t kinds = 0;
        for (const IValue& element : arg.toListRef()) {
          kinds |= uint64_t{1} << scalar_kind(element);
        }
        signature.add(0x1100 + kinds);
      }
    } else if (arg.isNone()) {
      signature.add(0x22);
    } else if (arg.isBool()) {
      signature.add(0x33 + (arg.toBool() ? 1 : 0));
    } else if (arg.isString()) {
      signature.add(std::hash<std::string_view>()(arg.toStringView()));
    } else if (arg.isDouble() && !values_vary) {
      const double value = arg.toDouble();
      uint64_t bits = 0;
      std::memcpy(&bits, &value, sizeof(bits));
      signature.add(bits);
    } else if (arg.isComplexDouble() && !values_vary) {
      const c10::complex<double> value = arg.toComplexDouble();
      uint64_t bits[2] = {0, 0};
      std::memcpy(&bits[0], &value, sizeof(bits));
      signature.add(bits[0]);
      signature.add(bits[1]);
    } else if (arg.isDouble() || arg.isComplexDouble()) {
      // Multi-tensor ops' scalars vary from call to call: by kind only.
      signature.add(0x4400 + scalar_kind(arg));
    } else if (arg.isInt() && integers_by_value) {
      signature.add(static_cast<uint64_t>(arg.toInt()));
    } else if (arg.isInt()) {
      // By sign only: kernels refuse negative or zero counts (multinomial's
      // num_samples, a negative length), while the values themselves are
      // sizes and dims, which the meta kernel checks.
      const int64_t value = arg.toInt();
      signature.add(0x40 + (value < 0 ? 0 : value == 0 ? 1 : 2));
    } else {
      signature.add(0x44); // a device, generator, ...: present
    }
  }
  return signature.digest();
}

} // namespace torch_npu_ops
