#include "OutputShapes.h"

#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <ATen/ops/empty_strided.h>

#include "BoolPowers.h"
#include "KernelResultLayouts.h"
#include "EmptyDimLists.h"
#include "PythonMetaWarmup.h"
#include "RangeFactoryOuts.h"
#include "SharedStorages.h"
#include "UndefinedResults.h"

#include "IValueTensors.h"
#include "SparseTensors.h"
#include "npu/NPUGraphsUtils.h"

namespace torch_npu_ops {
namespace {

constexpr size_t kMaxCacheEntries = 16384;

// Note [Meta kernels shape the CPU kernel's outputs] (OutputShapes.h).
thread_local bool t_shaping_npu_outputs = false;

class ShapingNpuOutputs {
 public:
  ShapingNpuOutputs() : previous_(t_shaping_npu_outputs) {
    t_shaping_npu_outputs = true;
  }
  ~ShapingNpuOutputs() {
    t_shaping_npu_outputs = previous_;
  }
  ShapingNpuOutputs(const ShapingNpuOutputs&) = delete;
  ShapingNpuOutputs& operator=(const ShapingNpuOutputs&) = delete;

 private:
  bool previous_;
};

template <typename T>
void put(std::string& key, const T& value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

void put_tensor(std::string& key, const at::Tensor& t) {
  key.push_back('T');
  if (!t.defined()) {
    key.push_back('0');
    return;
  }
  put(key, static_cast<int8_t>(t.device().type()));
  put(key, static_cast<int8_t>(t.scalar_type()));
  // A wrapped Python number takes no part in type promotion where a 0-dim
  // tensor of the same dtype does: x + 1.0 and x + torch.tensor(1.0,
  // dtype=torch.float64) have different result dtypes for an integer x.
  put(key, static_cast<int8_t>(t.is_conj() | (t.is_neg() << 1) |
                               (t.unsafeGetTensorImpl()->is_wrapped_number() << 2)));
  put(key, static_cast<int32_t>(t.dim()));
  for (const auto s : t.sizes()) {
    put(key, s);
  }
  for (const auto s : t.strides()) {
    put(key, s);
  }
  put(key, t.storage_offset());
}

// Appends what a meta kernel may depend on; false if `v` holds something we
// cannot describe (the result is then not cached).
bool put_value(std::string& key, const c10::IValue& v) {
  if (v.isTensor()) {
    if (is_sparse_layout(v.toTensor())) {
      return false; // its nnz is not part of the key
    }
    put_tensor(key, v.toTensor());
  } else if (v.isNone()) {
    key.push_back('N');
  } else if (v.isInt()) {
    key.push_back('i');
    put(key, v.toInt());
  } else if (v.isDouble()) {
    key.push_back('d');
    put(key, v.toDouble());
  } else if (v.isBool()) {
    key.push_back('b');
    put(key, v.toBool());
  } else if (v.isComplexDouble()) {
    key.push_back('c');
    put(key, v.toComplexDouble());
  } else if (v.isString()) {
    const auto& s = v.toStringRef();
    key.push_back('s');
    put(key, s.size());
    key.append(s);
  } else if (v.isDevice()) {
    key.push_back('D');
    put(key, static_cast<int8_t>(v.toDevice().type()));
    put(key, v.toDevice().index());
  } else if (v.isIntList()) {
    key.push_back('I');
    const auto list = v.toIntList();
    put(key, list.size());
    for (const int64_t x : list) {
      put(key, x);
    }
  } else if (v.isTensorList()) {
    key.push_back('L');
    const auto list = v.toTensorList();
    put(key, list.size());
    for (const at::Tensor& t : list) {
      if (is_sparse_layout(t)) {
        return false;
      }
      put_tensor(key, t);
    }
  } else if (v.isList()) {
    key.push_back('G');
    const auto list = v.toList();
    put(key, list.size());
    for (const c10::IValue& element : list) {
      if (!put_value(key, element)) {
        return false;
      }
    }
  } else {
    return false; // generators, objects, ...
  }
  return true;
}

class DropWarnings final : public c10::WarningHandler {
 public:
  DropWarnings() : previous_(c10::WarningUtils::get_warning_handler()) {
    c10::WarningUtils::set_warning_handler(this);
  }
  ~DropWarnings() override {
    c10::WarningUtils::set_warning_handler(previous_);
  }
  DropWarnings(const DropWarnings&) = delete;
  DropWarnings& operator=(const DropWarnings&) = delete;
  void process(const c10::Warning&) override {}

 private:
  c10::WarningHandler* previous_;
};

TensorSpec spec_of(const at::Tensor& t) {
  TensorSpec spec;
  if (!t.defined()) {
    return spec;
  }
  spec.defined = true;
  spec.sizes.assign(t.sizes().begin(), t.sizes().end());
  spec.strides.assign(t.strides().begin(), t.strides().end());
  spec.storage_offset = t.storage_offset();
  spec.dtype = t.scalar_type();
  return spec;
}

std::shared_ptr<const OutputSpec> run_meta(const TranslatedOp& target, const std::vector<c10::IValue>& args) {
  // Arguments that share npu memory share a meta storage, so that the meta
  // kernel's overlap checks see it (SharedStorages.h).
  std::optional<SharedStorages> shared;
  if (shares_npu_storage(args)) {
    shared.emplace(c10::DeviceType::Meta);
  }
  std::function<at::Tensor(const at::Tensor&)> to_meta = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || !t.device().is_privateuseone()) {
      return t;
    }
    if (is_sparse_layout(t)) {
      return sparse_with_members(t, c10::Device(c10::DeviceType::Meta), to_meta);
    }
    if (shared.has_value()) {
      return shared->view(t);
    }
    at::Tensor meta = at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::DeviceType::Meta));
    // Meta kernels of ops that see the conjugate and negative bits check them.
    meta._set_conj(t.is_conj());
    meta._set_neg(t.is_neg());
    return meta;
  };
  torch::jit::Stack stack;
  stack.reserve(args.size());
  for (const auto& arg : target.args_for(args)) {
    if (arg.isDevice() && arg.toDevice().is_privateuseone()) {
      stack.emplace_back(c10::Device(c10::DeviceType::Meta));
      continue;
    }
    stack.push_back(map_tensors(arg, to_meta));
  }
  // Note [An empty dim list reduces every dim].
  empty_dim_list_as_every_dim(target.op.schema(), stack);
  if (keeps_out_of_result_numel(target.op.schema())) {
    // Note [Range factories keep an out of the right size].
    empty_out_arguments(target.op.schema(), stack);
  }
  try {
    // The kernel itself warns, where the CPU's would (at every call; this
    // runs once per geometry): the meta kernel's warnings are dropped.
    DropWarnings quiet;
    const ShapingNpuOutputs shaping;
    target.op.redispatchBoxed(kernel_keys(stack, c10::BackendComponent::MetaBit), &stack);
  } catch (const std::exception&) {
    // No meta kernel, or one that needs the data.
    return nullptr;
  }
  auto spec = std::make_shared<OutputSpec>();
  for (const auto& result : stack) {
    // A sparse result's number of elements depends on the data.
    if (result.isTensor() && result.toTensor().defined() && result.toTensor().layout() != c10::kStrided) {
      return nullptr;
    }
    std::vector<TensorSpec> tensors;
    if (result.isTensor()) {
      tensors.push_back(spec_of(result.toTensor()));
    } else if (result.isTensorList()) {
      for (const at::Tensor& t : result.toTensorList()) {
        tensors.push_back(spec_of(t));
      }
    }
    spec->push_back(std::move(tensors));
  }
  // Note [Powers of bools by a bool stay bool]
  keep_bool_powers_bool(target.caller_schema, args, *spec);
  // Note [Results laid out as the CPU kernel lays them out]
  lay_out_as_the_cpu_kernel(target.caller_schema, args, *spec);
  // Note [Results the CPU kernel leaves undefined]
  leave_undefined_as_the_cpu_kernel(target.caller_schema, args, *spec);
  return spec;
}

bool returns_a_view(const c10::FunctionSchema& schema) {
  for (const auto& ret : schema.returns()) {
    if (ret.alias_info() != nullptr && !ret.alias_info()->isWrite()) {
      return true;
    }
  }
  return false;
}

} // namespace

bool shaping_npu_outputs() {
  return t_shaping_npu_outputs;
}

std::shared_ptr<const OutputSpec> infer_outputs(const TranslatedOp& target, const std::vector<c10::IValue>& args) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const OutputSpec>> cache;

  std::string key;
  key.reserve(128);
  const auto* schema_address = &target.caller_schema;
  put(key, schema_address);
  bool cacheable = true;
  for (const auto& arg : args) {
    if (!put_value(key, arg)) {
      cacheable = false;
      break;
    }
  }
  if (cacheable && shares_npu_storage(args)) {
    // Whether arguments overlap decides what the meta kernel says.
    std::vector<uint32_t> pattern;
    storage_sharing_pattern(args, pattern);
    key.push_back('S');
    for (const uint32_t ordinal : pattern) {
      put(key, ordinal);
    }
  }
  if (cacheable) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) {
      return it->second;
    }
  }
  // Note [Python meta kernels and the first op]. Only the meta kernel knows
  // a view's geometry: views wait for the imports (the synchronous path
  // would copy them). So does work captured into a graph, which cannot run
  // synchronously (Note [Stream capture]).
  if (!meta_kernels_ready() && !returns_a_view(target.caller_schema) &&
      c10_npu::current_stream_capture_status() == c10_npu::CaptureStatus::None) {
    return nullptr;
  }
  auto spec = run_meta(target, args);
  if (cacheable && spec != nullptr) {
    std::lock_guard<std::mutex> lock(mutex);
    if (cache.size() >= kMaxCacheEntries) {
      cache.clear(); // shapes changed wholesale (a new model or batch size)
    }
    cache.emplace(std::move(key), spec);
  }
  return spec;
}

} // namespace torch_npu_ops
