#include "DeviceOpExecutor.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/GradMode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/as_strided.h>
#include <ATen/native/Resize.h>
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "CallVerification.h"
#include "DeviceChecks.h"
#include "ExecutionCounters.h"
#include "IValueTensors.h"
#include "KernelAllocator.h"
#include "LaunchSite.h"
#include "OpTranslation.h"
#include "OutputShapes.h"
#include "PythonMetaWarmup.h"
#include "OutVariants.h"
#include "ResultCopy.h"
#include "ResultPlacement.h"
#include "SchemaAliases.h"
#include "SharedStorages.h"
#include "SparseResultShapes.h"
#include "SparseTensors.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUGenerator.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUStream.h"
#include "npu/NPUWork.h"

namespace torch_npu_ops {
namespace {

using c10::IValue;
using torch::jit::Stack;

bool is_npu(const at::Tensor& t) {
  return t.defined() && t.device().is_privateuseone();
}

std::vector<at::Tensor> tensors_of(const IValue& v) {
  std::vector<at::Tensor> out;
  for_each_tensor(v, [&](const at::Tensor& t) { out.push_back(t); });
  return out;
}

// Some CPU kernels compute outputs for the backward only when an input
// requires grad (sparse.mm's amax/amin argument indices): a kernel's CPU
// alias requires grad where the npu tensor does. It runs below autograd
// (BelowAutograd), so nothing is recorded.
void keep_requires_grad(at::Tensor& alias, const at::Tensor& t) {
  if (t.requires_grad()) {
    alias.set_requires_grad(true);
  }
}

// The dispatcher state a CPU kernel runs in, on whichever thread runs the
// work (the stream's worker, or a synchronizing host thread; see
// c10_npu::WorkFlags::Awaited): what the CPU gives it below autograd, with the
// caller's grad mode. The host's own state (autocast, Python modes) stays
// out: they see the npu op, not the CPU ops inside its kernel.
struct BelowAutograd {
  explicit BelowAutograd(bool grad_enabled)
      : dispatch_keys(c10::default_included_set,
                      c10::default_excluded_set | c10::autograd_dispatch_keyset_with_ADInplaceOrView),
        grad_mode(grad_enabled) {}
  c10::impl::ForceDispatchKeyGuard dispatch_keys;
  c10::AutoGradMode grad_mode;
};

at::Tensor cpu_alias(const at::Tensor& t);

// An npu tensor seen as a CPU tensor over the same memory. Dereferenced
// only inside device work (the address is the simulator's host alias).
at::Tensor cpu_alias(const at::Tensor& t) {
  if (!t.defined()) {
    return t;
  }
  if (is_sparse_layout(t)) {
    at::Tensor alias = sparse_with_members(t, c10::Device(c10::DeviceType::CPU), &cpu_alias);
    keep_requires_grad(alias, t);
    return alias;
  }
  const auto options = t.options().device(c10::DeviceType::CPU);
  at::Tensor alias = t.data_ptr() == nullptr
      ? at::empty_strided(t.sizes(), t.strides(), options)
      : at::from_blob(c10_npu::host_access(t.data_ptr()), t.sizes(), t.strides(), options);
  // Ops that handle the conjugate and negative bits themselves (mm, dot,
  // views, ...) receive tensors with the bits: the CPU kernel must see them.
  alias._set_conj(t.is_conj());
  alias._set_neg(t.is_neg());
  keep_requires_grad(alias, t);
  return alias;
}

// A view of `base` with the geometry and dtype of `spec`, which came from a
// meta base at storage offset 0. view_as_real and view_as_complex change the
// dtype, so the offset is combined in bytes.
at::Tensor view_of(const at::Tensor& base, const TensorSpec& spec) {
  if (spec.dtype == base.scalar_type()) {
    return at::as_strided(base, spec.sizes, spec.strides, base.storage_offset() + spec.storage_offset);
  }
  const int64_t itemsize = static_cast<int64_t>(c10::elementSize(spec.dtype));
  const int64_t offset_bytes = base.storage_offset() * base.element_size() + spec.storage_offset * itemsize;
  TORCH_CHECK(
      offset_bytes % itemsize == 0, "a view of dtype ", spec.dtype, " needs a storage offset that is a multiple of ",
      itemsize, " bytes, got ", offset_bytes, " bytes");
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::TensorImpl::VIEW, c10::Storage(base.storage()), base.key_set(), c10::scalarTypeToTypeMeta(spec.dtype));
  impl->set_sizes_and_strides(spec.sizes, spec.strides, offset_bytes / itemsize);
  return at::Tensor(std::move(impl));
}

// Some CPU out= kernels leave their output a conjugate view of the values
// they stored (linalg_lu_solve with left=False flips the output's conjugate
// bit). The npu output cannot take the flag once the host has it: give the
// CPU alias `out` back the npu tensor's bits and store the values instead.
void keep_math_bits(const at::Tensor& out, bool conj, bool neg) {
  if (out.is_conj() != conj) {
    out._set_conj(conj);
    out.conj_physical_();
  }
  if (out.is_neg() != neg) {
    out._set_neg(neg);
    out.neg_();
  }
}

// Some CPU out= kernels restride their output to the input's memory format
// (max_unpool2d with a channels-last input): the values are then laid out
// with the new strides in the same memory, which the npu tensor, made with
// the meta kernel's strides, would misread. Lay them out as npu expects. A
// kernel that resized its output cannot be followed: that raises.
void keep_geometry(const at::Tensor& out, void* data, c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  if (out.sizes().equals(sizes) && out.strides().equals(strides) && out.data_ptr() == data) {
    return;
  }
  TORCH_CHECK(
      out.sizes().equals(sizes), "the CPU kernel resized its output from ", sizes, " to ", out.sizes());
  if (out.numel() == 0) {
    return;
  }
  const at::Tensor values = out.clone();
  at::from_blob(data, sizes, strides, out.options()).copy_(values);
}

std::vector<at::Tensor> cpu_aliases(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) {
    out.push_back(cpu_alias(t));
  }
  return out;
}

// Where a tensor's values live in device memory and how they are laid out,
// as a kernel first sees it (a failing kernel may change the tensor).
struct DeviceGeometry {
  void* data;
  c10::SmallVector<int64_t, 6> sizes;
  c10::SmallVector<int64_t, 6> strides;
  c10::ScalarType dtype;

  explicit DeviceGeometry(const at::Tensor& t)
      : data(t.data_ptr()),
        sizes(t.sizes().begin(), t.sizes().end()),
        strides(t.strides().begin(), t.strides().end()),
        dtype(t.scalar_type()) {}

  // A CPU tensor over that memory with that layout (only inside device work).
  at::Tensor view() const {
    return at::from_blob(data, sizes, strides, at::TensorOptions().dtype(dtype).device(c10::DeviceType::CPU));
  }
};

std::vector<DeviceGeometry> geometries(const std::vector<at::Tensor>& views) {
  std::vector<DeviceGeometry> out;
  out.reserve(views.size());
  for (const auto& v : views) {
    out.emplace_back(v);
  }
  return out;
}

// The out= arguments of an op (by position) with their geometry.
std::vector<std::pair<size_t, DeviceGeometry>> out_argument_geometry(
    const c10::FunctionSchema& schema, const std::vector<IValue>& cpu_args) {
  std::vector<std::pair<size_t, DeviceGeometry>> out;
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size() && i < cpu_args.size(); ++i) {
    if (arguments[i].is_out() && cpu_args[i].isTensor() && cpu_args[i].toTensor().defined()) {
      out.emplace_back(i, DeviceGeometry(cpu_args[i].toTensor()));
    }
  }
  return out;
}

bool returns_only_tensors(const c10::FunctionSchema& schema) {
  for (const auto& ret : schema.returns()) {
    const auto kind = ret.type()->kind();
    if (kind == c10::TypeKind::TensorType) {
      continue;
    }
    if (kind == c10::TypeKind::ListType &&
        ret.type()->castRaw<c10::ListType>()->getElementType()->kind() == c10::TypeKind::TensorType) {
      continue;
    }
    return false;
  }
  return true;
}

// Ops whose output shapes only their CPU kernel knows: they depend on the
// values of the inputs, or the meta kernel disagrees with the CPU kernel.
bool is_data_dependent(const c10::OperatorHandle& op, const std::vector<IValue>& args) {
  static const std::unordered_set<std::string_view> kNames = {
      "aten::nonzero", "aten::masked_select", "aten::_unique", "aten::_unique2",
      "aten::unique_dim", "aten::unique_consecutive", "aten::unique_dim_consecutive",
      "aten::argwhere", "aten::repeat_interleave", "aten::bincount", "aten::histc",
      // The meta kernel sizes the auxiliary outputs (offset2bag, bag_size,
      // max_indices) for every mode; the CPU kernel leaves some empty, and
      // the backward reads them by their size: only the CPU's shapes do.
      "aten::_embedding_bag", "aten::_embedding_bag_forward_only",
  };
  const auto& name = op.schema().name();
  if (kNames.count(name) > 0) {
    return true;
  }
  // Conversions of a dense tensor to a sparse layout (to_sparse, ...): how
  // many elements the result specifies depends on the values.
  if (std::string_view(name).starts_with("aten::_to_sparse")) {
    return true;
  }
  // The meta kernels of the batch and layer norms follow CUDA's kernels: the
  // statistics are float32 for reduced-precision inputs, and batch norm
  // computes them in evaluation too. The CPU kernels keep the input's dtype
  // (unless the parameters are float32) and return empty statistics in
  // evaluation, and the backward kernels insist on both: in those cases only
  // the CPU's outputs do.
  static const std::unordered_set<std::string_view> kNorms = {
      "aten::native_batch_norm", "aten::_native_batch_norm_legit",
      "aten::_native_batch_norm_legit_no_training", "aten::_batch_norm_with_update",
      "aten::native_layer_norm",
  };
  if (kNorms.count(name) > 0 && !args.empty() && args[0].isTensor()) {
    const auto dtype = args[0].toTensor().scalar_type();
    if (dtype == at::kBFloat16 || dtype == at::kHalf || name == "aten::_native_batch_norm_legit_no_training") {
      return true;
    }
    const auto& arguments = op.schema().arguments();
    for (size_t i = 0; i < arguments.size() && i < args.size(); ++i) {
      if (arguments[i].name() == "training" && args[i].isBool()) {
        return !args[i].toBool();
      }
    }
    return false;
  }
  if (name == "aten::index") {
    // Boolean masks select a data-dependent number of elements.
    bool has_mask = false;
    for (size_t i = 1; i < args.size(); ++i) {
      for_each_tensor(args[i], [&](const at::Tensor& t) {
        has_mask |= t.defined() && (t.scalar_type() == at::kBool || t.scalar_type() == at::kByte);
      });
    }
    return has_mask;
  }
  return false;
}

uint64_t mix_seed(uint64_t seed, uint64_t offset) {
  // splitmix64 of (seed, offset): a distinct, reproducible CPU seed for each
  // slice of the npu generator's counter space.
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (offset + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// What decides whether the CPU kernel of a call can fail (Note [Errors at
// the call]): the op; each tensor's dtype, layout, rank and emptiness; and
// the arguments checked by value (booleans, strings, dtypes, floating-point
// scalars such as uniform_'s bounds), integers by sign. Sizes and integer
// values are left out: the meta kernel checks shapes and dims, and keying on
// them would verify every new shape again. So are the hyper-parameters of the optimizer kernels
// (_fused_*, _foreach_*), which change every step.
uint64_t call_signature(const c10::FunctionSchema& schema, const std::vector<IValue>& args) {
  CallSignature signature(&schema);
  const std::string_view name = schema.name();
  const bool values_vary = name.starts_with("aten::_fused_") || name.starts_with("aten::_foreach_");
  const auto add_tensor = [&](const at::Tensor& t) {
    if (!t.defined()) {
      signature.add(0x7F);
      return;
    }
    signature.add((static_cast<uint64_t>(t.scalar_type()) << 40) | (static_cast<uint64_t>(t.layout()) << 32) |
                  (static_cast<uint64_t>(t.dim()) << 1) | (t.numel() == 0 ? 1 : 0));
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
        signature.add(0x11); // a list of non-tensors (sizes, dims): not by value
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

// The arguments of the CPU kernel: npu tensors as CPU aliases of their
// memory, host tensors copied (the host may change them before the work
// runs), npu devices as CPU, npu generators as CPU generators seeded from the
// npu generator. The work holds no reference to npu storage: as on CUDA,
// memory freed by the host is reused in stream order, so queued work never
// inflates memory use.
std::vector<IValue> cpu_arguments(
    const c10::FunctionSchema& schema, const std::vector<IValue>& args, c10::Device device,
    bool resizable_shared = false) {
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
    const auto& type = schema.arguments()[i].real_type();
    const bool is_generator = type->kind() == c10::TypeKind::GeneratorType ||
        (type->kind() == c10::TypeKind::OptionalType &&
         type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType);
    if (is_generator) {
      at::Generator npu_generator = arg.isNone()
          ? c10_npu::getDefaultNPUGenerator(device.index())
          : arg.toGenerator();
      TORCH_CHECK(
          npu_generator.device().is_privateuseone(), "Expected a generator of device 'npu' for ",
          schema.name(), ", got one of ", npu_generator.device());
      auto* impl = npu_generator.get<c10_npu::NPUGeneratorImpl>();
      std::pair<uint64_t, uint64_t> inputs;
      {
        std::lock_guard<std::mutex> lock(npu_generator.mutex());
        inputs = impl->philox_engine_inputs(static_cast<uint64_t>(std::max<int64_t>(numel, 1)));
      }
      out.emplace_back(at::detail::createCPUGenerator(mix_seed(inputs.first, inputs.second)));
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
        return t.clone();
      }
      if (!shared.has_value()) {
        return cpu_alias(t);
      }
      // The same npu tensor twice is the same CPU tensor twice: kernels
      // treat an out= that *is* an input (is_same) as full overlap, even
      // when empty.
      auto [it, fresh] = same_tensor.try_emplace(t.unsafeGetTensorImpl());
      if (fresh) {
        it->second = t.layout() == c10::kStrided && t.storage().data() != nullptr ? shared->view(t) : cpu_alias(t);
        keep_requires_grad(it->second, t);
      }
      return it->second;
    }));
  }
  return out;
}

// A kernel's stack from a work item's first `count` arguments (all by
// default): copied, never moved out, and each generator a fresh copy of the
// one made at launch (Note [Device work items run many times]: the item may
// run again, and the kernel advances the generator it gets).
Stack as_stack(const std::vector<IValue>& args, size_t count = SIZE_MAX) {
  count = std::min(count, args.size());
  Stack stack;
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

// The results of a synchronous op, moved into npu memory by device work.
// The kernel left them in device-work memory (or in host memory, or
// aliasing its inputs); once the host knows their sizes it allocates npu
// tensors for them, and a work item queued after the op copies the values
// and frees the kernel's memory (device-work memory is freed by device
// work: no later work can still be using it).
class ResultTransfers {
 public:
  explicit ResultTransfers(c10::Device device) : device_(device) {}

  // A new npu tensor (of `result`'s layout) that will hold `result`'s values.
  at::Tensor to_npu(const at::Tensor& result) {
    if (!result.defined()) {
      return result;
    }
    if (is_sparse_layout(result)) {
      return sparse_with_members(result, device_, [&](const at::Tensor& m) { return to_npu(m); });
    }
    // Keeps the result's strides when they are dense, as Tensor.to does.
    at::Tensor npu = at::empty_like(result, result.options().device(device_));
    copy(npu, result);
    return npu;
  }

  // Queues the copy of `result` into the dense npu tensor `npu` (same sizes).
  void copy(const at::Tensor& npu, const at::Tensor& result) {
    if (npu.numel() > 0) {
      copies_.emplace_back(cpu_alias(npu), result);
    }
  }

  void launch(const c10_npu::NPUStream& stream, const char* name) {
    if (copies_.empty()) {
      return;
    }
    // The kernel's memory is freed with the item, when the runtime releases
    // it (on the worker, after its last run: no later work can still be
    // using that memory).
    c10_npu::launch_host_work(stream, name, [copies = std::move(copies_)] {
      for (const auto& [npu, result] : copies) {
        copy_result(npu, result);
      }
    });
  }

 private:
  c10::Device device_;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies_; // (CPU view of npu memory, result)
};

// A CPU alias of out= argument `t` that its kernel may resize: a
// data-dependent kernel (masked_select, nonzero, unique, ...) learns its
// output's size only as it runs. Resizing moves the alias to new host memory
// (the old bytes copied, as resize_ keeps them), and run_sync then resizes
// the npu argument and copies the result back.
at::Tensor resizable_cpu_alias(const at::Tensor& t) {
  const c10::Storage& npu_storage = t.storage();
  c10::Storage storage(
      c10::Storage::use_byte_size_t(), npu_storage.nbytes(),
      c10::DataPtr(c10_npu::host_access(const_cast<void*>(npu_storage.data())), c10::Device(c10::DeviceType::CPU)),
      c10::GetCPUAllocator(), /*resizable=*/true);
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return at::Tensor(std::move(impl));
}

// Runs the op synchronously as device work and returns its results on npu.
void run_sync(const TranslatedOp& target, const std::vector<IValue>& args, c10::Device device,
              const c10_npu::NPUStream& stream, Stack* stack) {
  const auto& schema = target.op.schema();
  struct State {
    std::vector<IValue> results;
    std::exception_ptr error;
    CallVerification verification; // the kernel's warnings, for the host
  };
  auto state = std::make_shared<State>();
  c10_npu::LaunchSite site = capture_launch_site();
  const std::vector<IValue> target_args = target.args_for(args);
  // Shared storages may be resized by the kernel (an out= that overlaps an
  // input: the CPU resizes it, then its overlap check refuses the call).
  std::vector<IValue> cpu_args = cpu_arguments(schema, target_args, device, /*resizable_shared=*/true);
  for (size_t i = 0; i < cpu_args.size() && i < schema.arguments().size(); ++i) {
    if (!schema.arguments()[i].is_out() || !cpu_args[i].isTensor()) {
      continue;
    }
    const at::Tensor& npu_out = target_args[i].toTensor();
    const at::Tensor& cpu_out = cpu_args[i].toTensor();
    // Not where the alias is an input too, or shares its storage with one
    // (SharedStorages.h): the kernel's overlap check must see that.
    if (is_npu(npu_out) && npu_out.layout() == c10::kStrided && npu_out.storage().data() != nullptr &&
        !cpu_out.storage().resizable() && cpu_out.use_count() == 1 && cpu_out.storage().use_count() == 1) {
      cpu_args[i] = resizable_cpu_alias(npu_out);
    }
  }
  const c10::DispatchKeySet keys = kernel_keys(cpu_args, c10::BackendComponent::CPUBit);
  c10_npu::launch_host_work(
      stream, schema.name().c_str(),
      [state, op = target.op, keys, cpu_args = std::move(cpu_args),
       grad_enabled = c10::GradMode::is_enabled()]() mutable {
        const CollectWarnings warnings(state->verification);
        try {
          const BelowAutograd autograd(grad_enabled);
          KernelAllocationScope allocations;
          Stack s = as_stack(cpu_args);
          op.redispatchBoxed(keys, &s);
          allocations.end();
          // The results stay where the kernel left them (device-work
          // memory, mostly) until the transfer work below copies them.
          state->results = std::move(s);
        } catch (...) {
          state->error = std::current_exception();
        }
      },
      nullptr, c10_npu::WorkFlags::Awaited);
  stream.synchronize(); // an error of earlier work names its own launch
  for (const c10::Warning& warning : state->verification.warnings) {
    c10::warn(warning); // Python's warnings, as the CPU kernel's
  }
  if (state->error) {
    // The host waited: the error is raised at the call.
    try {
      std::rethrow_exception(state->error);
    } catch (c10::Error& e) {
      if (site != nullptr) {
        e.add_context("launched from " + *site);
      }
      throw;
    }
  }
  // Now that their sizes are known, the results get npu memory, and device
  // work copies them there: the host does not wait for that.
  ResultTransfers transfers(device);
  const auto& returns = target.caller_schema.returns();
  for (size_t i = 0; i < state->results.size(); ++i) {
    const IValue& result = state->results[i];
    const int alias = i < returns.size() ? aliased_argument(target.caller_schema, returns[i]) : -1;
    if (alias >= 0 && returns[i].alias_info()->isWrite()) {
      // An in-place or out= kernel may have given its output new memory
      // (an empty npu output's alias has none to write into; sparse outputs
      // get new members): the npu argument then takes the new values.
      const at::Tensor& out = result.isTensor() ? result.toTensor() : at::Tensor();
      const at::Tensor& npu_out = args[alias].isTensor() ? args[alias].toTensor() : at::Tensor();
      if (is_sparse_layout(npu_out)) {
        TORCH_CHECK(
            out.defined() && out.layout() == npu_out.layout(), schema.name(), ": the CPU kernel returned a ",
            out.defined() ? c10::str(out.layout()) : "undefined", " tensor for a ", npu_out.layout(), " output");
        set_sparse_members(npu_out, transfers.to_npu(out));
      } else if (out.defined() && npu_out.defined() &&
                 (out.data_ptr() != c10_npu::host_access(npu_out.data_ptr()) || !out.sizes().equals(npu_out.sizes()))) {
        npu_out.resize_(out.sizes());
        transfers.copy(npu_out, out);
      }
      stack->push_back(args[alias]);
      continue;
    }
    // A view's result must share its base's memory; a copy would silently
    // break the aliasing (writes through it would be lost). Views are
    // shaped by their meta kernels, never run here.
    TORCH_CHECK(alias < 0, "torch-npu-ops: the view op ", schema.name(),
                " reached the synchronous path, which would return a copy instead of a view "
                "(a torch-npu-ops bug: please report it)");
    stack->push_back(map_tensors(result, [&](const at::Tensor& t) { return transfers.to_npu(t); }));
  }
  state->results.clear();
  transfers.launch(stream, schema.name().c_str());
  count(ExecutionPath::DeviceSync, schema.name());
}

// True if the call must resize an out= argument that overlaps itself (an
// expanded tensor) or shares memory with another argument. CPU kernels check
// such an out before they resize it, and mostly refuse it ("unsupported
// operation"); resized here to the meta kernel's shape first, it would pass
// those checks and be written. run_sync lets the CPU kernel see it as given.
bool resizes_an_overlapping_out(const c10::FunctionSchema& schema, const std::vector<IValue>& args,
                                const OutputSpec& spec) {
  const auto& returns = schema.returns();
  for (size_t i = 0; i < returns.size() && i < spec.size(); ++i) {
    const int alias = aliased_argument(schema, returns[i]);
    if (alias < 0 || !returns[i].alias_info()->isWrite() || !schema.arguments()[alias].is_out()) {
      continue;
    }
    const auto outs = tensors_of(args[alias]);
    for (size_t k = 0; k < outs.size() && k < spec[i].size(); ++k) {
      const at::Tensor& out = outs[k];
      if (!spec[i][k].defined || out.sizes().equals(spec[i][k].sizes) || out.layout() != c10::kStrided) {
        continue;
      }
      if (out.numel() > 0 && at::has_internal_overlap(out) == at::MemOverlap::Yes) {
        return true;
      }
      for (size_t j = 0; j < args.size(); ++j) {
        bool shared = false;
        for_each_tensor(args[j], [&](const at::Tensor& t) {
          if (!t.defined() || t.layout() != c10::kStrided || !t.has_storage()) {
            return;
          }
          shared |= j != static_cast<size_t>(alias) && t.is_same(out);
          shared |= out.numel() > 0 && t.numel() > 0 && !t.is_same(out) && t.storage().is_alias_of(out.storage());
        });
        if (shared) {
          return true;
        }
      }
    }
  }
  return false;
}

// TORCH_NPU_OPS_STRICT=1: an op that could only run synchronously for want
// of a meta kernel is an error instead (data-dependent ops are still fine).
bool strict_mode() {
  static const bool strict = [] {
    const char* env = std::getenv("TORCH_NPU_OPS_STRICT");
    return env != nullptr && std::string_view(env) == "1";
  }();
  return strict;
}

// Queues a sparse op with dense results (SparseOpResults::predict) like
// any other op: the host returns once the work is queued. Fresh results are
// allocated here and the kernel's results copied into them; an argument the
// op writes into takes the predicted sizes now, and the kernel writes into it.
void run_sparse_async(const TranslatedOp& target, const std::vector<IValue>& args,
                      const std::vector<TensorSpec>& specs, c10::Device device,
                      const c10_npu::NPUStream& stream, Stack* stack) {
  const auto& returns = target.caller_schema.returns();
  std::vector<IValue> results;
  std::vector<at::Tensor> outputs;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& spec = specs[i];
    const int alias = aliased_argument(target.caller_schema, returns[i]);
    if (alias >= 0) {
      at::Tensor out = args[alias].toTensor();
      if (!out.sizes().equals(spec.sizes)) {
        out.resize_(spec.sizes);
      }
      outputs.push_back(out);
      results.push_back(args[alias]);
    } else {
      outputs.push_back(at::empty_strided(spec.sizes, spec.strides, at::TensorOptions().dtype(spec.dtype).device(device)));
      results.emplace_back(outputs.back());
    }
  }
  const auto& schema = target.op.schema();
  std::vector<IValue> cpu_args = cpu_arguments(schema, target.args_for(args), device);
  const c10::DispatchKeySet keys = kernel_keys(cpu_args, c10::BackendComponent::CPUBit);
  c10_npu::launch_host_work(
      stream, schema.name().c_str(),
      [op = target.op, keys, cpu_args = std::move(cpu_args), views = cpu_aliases(outputs),
       grad_enabled = c10::GradMode::is_enabled()]() mutable {
        const BelowAutograd autograd(grad_enabled);
        KernelAllocationScope allocations;
        Stack s = as_stack(cpu_args);
        op.redispatchBoxed(keys, &s);
        for (size_t i = 0; i < views.size() && i < s.size(); ++i) {
          const at::Tensor& result = s[i].toTensor();
          // The results were sized before the kernel ran; copy_ would
          // broadcast a result of other sizes.
          TORCH_CHECK(result.layout() == c10::kStrided && result.sizes().equals(views[i].sizes()), op.schema().name(),
                      ": the CPU kernel returned a ", result.layout(), " result of sizes ", result.sizes(),
                      " where a strided one of sizes ", views[i].sizes(), " was expected (a torch-npu-ops bug)");
          if (views[i].numel() > 0 && result.const_data_ptr() != views[i].const_data_ptr()) {
            copy_result(views[i], result);
            count_result(ResultDelivery::Copied);
          }
        }
      },
      capture_launch_site());
  for (auto& result : results) {
    stack->push_back(std::move(result));
  }
  count(ExecutionPath::DeviceAsync, schema.name());
}

// After an out= argument was resized: the strides the meta kernel gave the
// output, when they describe the same memory (a permutation of a dense
// layout), as the CPU's structured kernels restride it.
void restride_like_meta(const at::Tensor& out, const TensorSpec& spec) {
  if (out.strides().equals(spec.strides)) {
    return;
  }
  const size_t needed = at::detail::computeStorageNbytes(spec.sizes, spec.strides, out.element_size(),
                                                         out.storage_offset());
  if (needed <= out.storage().nbytes() && out.numel() > 0) {
    out.as_strided_(spec.sizes, spec.strides);
  }
}

// Takes the op's arguments off the stack.
std::vector<IValue> pop_arguments(const c10::FunctionSchema& schema, Stack* stack) {
  const auto num_args = static_cast<std::ptrdiff_t>(schema.arguments().size());
  std::vector<IValue> args(std::make_move_iterator(stack->end() - num_args), std::make_move_iterator(stack->end()));
  stack->erase(stack->end() - num_args, stack->end());
  return args;
}

} // namespace

void run_sparse_on_npu(const c10::OperatorHandle& op, Stack* stack) {
  std::vector<IValue> args = pop_arguments(op.schema(), stack);
  const c10::Device device = checked_op_device(op.schema(), args);
  const c10_npu::NPUGuard guard(device);
  const c10_npu::NPUStream stream = c10_npu::getCurrentNPUStream(device.index());
  const TranslatedOp target = translate(op, args);
  const SparseOpResults results(target, args);
  if (const auto outputs = results.predict()) {
    run_sparse_async(target, args, *outputs, device, stream, stack);
    return;
  }
  const size_t below = stack->size();
  run_sync(target, args, device, stream, stack);
  results.learn(c10::ArrayRef<IValue>(*stack).slice(below));
}

void run_on_npu(const c10::OperatorHandle& op, Stack* stack) {
  const auto& schema = op.schema();
  std::vector<IValue> args = pop_arguments(schema, stack);
  const c10::Device device = checked_op_device(schema, args);
  const c10_npu::NPUGuard guard(device);
  const c10_npu::NPUStream stream = c10_npu::getCurrentNPUStream(device.index());
  TranslatedOp target = translate(op, args);
  const auto& target_schema = target.op.schema();

  std::shared_ptr<const OutputSpec> spec;
  if (returns_only_tensors(schema) && !is_data_dependent(op, args)) {
    spec = infer_outputs(target, args);
  }
  if (spec == nullptr) {
    // No meta kernel, or one that needs the data: run synchronously, which
    // also reports genuine argument errors at the call site.
    TORCH_CHECK(
        !strict_mode() || is_data_dependent(op, args) || !returns_only_tensors(schema) ||
            !meta_kernels_ready(),
        "torch-npu-ops strict mode (TORCH_NPU_OPS_STRICT=1): ", schema.name(),
        " has no meta kernel for these arguments, so it would run synchronously. "
        "Unset TORCH_NPU_OPS_STRICT to allow it.");
    run_sync(target, args, device, stream, stack);
    return;
  }
  if (resizes_an_overlapping_out(schema, args, *spec)) {
    run_sync(target, args, device, stream, stack);
    return;
  }

  // Outputs on npu, shaped by the meta results.
  const auto& returns = schema.returns();
  std::vector<IValue> results;
  std::vector<at::Tensor> fresh_outputs;
  std::vector<bool> return_is_fresh(returns.size(), false);
  for (size_t i = 0; i < returns.size() && i < spec->size(); ++i) {
    const std::vector<TensorSpec>& specs = (*spec)[i];
    const bool is_list = returns[i].type()->kind() == c10::TypeKind::ListType;
    const int alias = aliased_argument(schema, returns[i]);
    if (alias >= 0 && returns[i].alias_info()->isWrite()) {
      // In-place or out=: the kernel writes into the argument, which the
      // meta kernel may have resized.
      const auto npu_outs = tensors_of(args[alias]);
      const bool is_out = schema.arguments()[alias].is_out();
      for (size_t k = 0; k < npu_outs.size() && k < specs.size(); ++k) {
        if (specs[k].defined && !npu_outs[k].sizes().equals(specs[k].sizes)) {
          if (is_out) {
            // As the CPU's out= kernels: resize_output warns when it resizes
            // a non-empty tensor (on the host, at every call), then the
            // output takes the meta kernel's strides.
            at::native::resize_output(npu_outs[k], specs[k].sizes);
            restride_like_meta(npu_outs[k], specs[k]);
          } else {
            npu_outs[k].resize_(specs[k].sizes);
          }
        }
      }
      results.push_back(args[alias]);
      continue;
    }
    std::vector<at::Tensor> outs;
    if (alias >= 0) {
      // A view of the argument.
      const auto base = tensors_of(args[alias]);
      for (size_t k = 0; k < specs.size(); ++k) {
        const at::Tensor& b = base[std::min(k, base.size() - 1)];
        outs.push_back(specs[k].defined ? view_of(b, specs[k]) : at::Tensor());
      }
    } else {
      return_is_fresh[i] = true;
      for (const auto& s : specs) {
        outs.push_back(s.defined ? at::empty_strided(s.sizes, s.strides,
                                                     at::TensorOptions().dtype(s.dtype).device(device))
                                 : at::Tensor());
        fresh_outputs.push_back(outs.back());
      }
    }
    if (is_list) {
      results.emplace_back(c10::List<at::Tensor>(outs));
    } else {
      results.emplace_back(outs.empty() ? at::Tensor() : outs[0]);
    }
  }

  bool all_fresh_defined = true;
  for (const auto& out : fresh_outputs) {
    all_fresh_defined &= out.defined();
  }
  std::vector<IValue> cpu_args = cpu_arguments(target_schema, target.args_for(args), device);
  c10_npu::LaunchSite site = capture_launch_site();

  // A functional op with an out= overload writes straight into the npu
  // outputs; otherwise its host results are copied into them.
  std::optional<c10::OperatorHandle> out_op;
  if (!target.adapt && all_fresh_defined && fresh_outputs.size() == returns.size()) {
    out_op = out_variant(target.op);
  }
  // Note [Errors at the call]: the first call of a signature waits for its
  // kernel and raises the kernel's own exception here.
  const uint64_t signature = call_signature(target_schema, target.args_for(args));
  std::shared_ptr<CallVerification> verification = verification_for(signature);
  if (out_op.has_value()) {
    for (auto& out : fresh_outputs) {
      cpu_args.emplace_back(cpu_alias(out));
    }
    c10_npu::launch_host_work(
        stream, target_schema.name().c_str(),
        verified_work(verification, [functional = target.op, op = *out_op, cpu_args = std::move(cpu_args),
         num_outputs = fresh_outputs.size(), output_geometry = geometries(cpu_aliases(fresh_outputs)),
         grad_enabled = c10::GradMode::is_enabled()]() mutable {
          const BelowAutograd autograd(grad_enabled);
          KernelAllocationScope allocations;
          try {
            Stack s = as_stack(cpu_args);
            {
              ResizedOutputWatch watch;
              op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &s);
              if (watch.resized()) {
                deny_out_variant(functional); // the result below is still right
              }
            }
            for (size_t i = cpu_args.size() - num_outputs; i < cpu_args.size(); ++i) {
              const at::Tensor& out = cpu_args[i].toTensor();
              const DeviceGeometry& geometry = output_geometry[i - (cpu_args.size() - num_outputs)];
              keep_math_bits(out, false, false); // fresh outputs have none
              keep_geometry(out, geometry.data, geometry.sizes, geometry.strides);
            }
          } catch (const std::exception&) {
            // Some out= kernels use `out` as scratch space of another shape
            // (mse_loss resizes it to the input's shape before reducing),
            // which a fixed-size device output cannot be. Run the functional
            // op and copy its results; remember not to try out= again. A
            // genuine error raises again from the functional kernel.
            deny_out_variant(functional);
            // The failed kernel may have changed the outputs' sizes before
            // giving up: view the device memory afresh with its geometry.
            Stack s = as_stack(cpu_args, cpu_args.size() - num_outputs);
            functional.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &s);
            for (size_t i = 0; i < output_geometry.size() && i < s.size(); ++i) {
              copy_result(output_geometry[i].view(), s[i].toTensor());
            }
          }
        }),
        std::move(site));
  } else {
    // Computed before cpu_args moves into the work item.
    auto out_args = out_argument_geometry(target_schema, cpu_args);
    std::vector<std::pair<bool, bool>> out_bits; // the npu out arguments' conjugate and negative bits
    for (const auto& [index, geometry] : out_args) {
      out_bits.emplace_back(cpu_args[index].toTensor().is_conj(), cpu_args[index].toTensor().is_neg());
    }
    c10_npu::launch_host_work(
        stream, target_schema.name().c_str(),
        verified_work(verification, [op = target.op, cpu_args = std::move(cpu_args), fresh_views = cpu_aliases(fresh_outputs),
         return_is_fresh, out_args = std::move(out_args), out_bits = std::move(out_bits),
         grad_enabled = c10::GradMode::is_enabled()]() mutable {
          const BelowAutograd autograd(grad_enabled);
          KernelAllocationScope allocations;
          Stack s;
          std::optional<ResultPlacement> placement;
          if (out_args.empty()) {
            placement.emplace(op, cpu_args, fresh_views, allocations);
            s = as_stack(cpu_args);
            op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &s);
          } else {
            s = as_stack(cpu_args);
            try {
              op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &s);
              for (size_t k = 0; k < out_args.size(); ++k) {
                const at::Tensor& out = cpu_args[out_args[k].first].toTensor();
                const DeviceGeometry& geometry = out_args[k].second;
                keep_math_bits(out, out_bits[k].first, out_bits[k].second);
                keep_geometry(out, geometry.data, geometry.sizes, geometry.strides);
              }
            } catch (const std::exception& error) {
              // Some out= kernels use `out` as scratch space of another shape
              // first (mse_loss.out resizes it to the input's shape before
              // reducing into it), which fixed-size device memory cannot be.
              // Retry with host temporaries, then copy them to the device.
              // Only then: any other error is the kernel refusing the call
              // (an out= overlapping an input), which host temporaries would
              // silently get around.
              if (std::strstr(error.what(), "Trying to resize storage that is not resizable") == nullptr) {
                throw;
              }
              s = as_stack(cpu_args);
              std::vector<std::pair<at::Tensor, at::Tensor>> copies;
              for (const auto& [index, geometry] : out_args) {
                at::Tensor device_view = geometry.view();
                at::Tensor scratch = at::empty({0}, device_view.options());
                s[index] = scratch;
                copies.emplace_back(device_view, scratch);
              }
              op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &s);
              for (auto& [device_view, scratch] : copies) {
                copy_result(device_view, scratch);
              }
            }
          }
          // Functional results not already computed in the npu outputs go
          // there now (in-place and out= results already are there).
          std::vector<at::Tensor> fresh_results;
          fresh_results.reserve(fresh_views.size());
          for (size_t i = 0; i < return_is_fresh.size() && i < s.size(); ++i) {
            if (return_is_fresh[i]) {
              for_each_tensor(s[i], [&](const at::Tensor& t) { fresh_results.push_back(t); });
            }
          }
          s.clear();
          if (placement.has_value()) {
            fresh_results = placement->resolve(std::move(fresh_results));
          }
          for (size_t k = 0; k < fresh_results.size() && k < fresh_views.size(); ++k) {
            const at::Tensor& t = fresh_results[k];
            const at::Tensor& view = fresh_views[k];
            if (t.defined() && view.defined() && view.numel() > 0) {
              copy_result(view, t);
              count_result(ResultDelivery::Copied);
            }
          }
          fresh_results.clear();
          if (placement.has_value()) {
            placement->close(); // raises if the kernel kept lent memory
          }
        }),
        std::move(site));
  }
  if (verification != nullptr) {
    finish_verification(verification, signature, [&] { stream.synchronize(); });
  }
  for (auto& r : results) {
    stack->push_back(std::move(r));
  }
  count(ExecutionPath::DeviceAsync, schema.name());
}

} // namespace torch_npu_ops
