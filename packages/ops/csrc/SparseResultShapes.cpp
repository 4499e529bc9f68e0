#include "SparseResultShapes.h"

#include <mutex>
#include <string>
#include <unordered_map>

#include <ATen/ops/empty.h>
#include <c10/util/StringUtil.h>

#include "SparseTensors.h"

namespace torch_npu_ops {
namespace {

using c10::IValue;

constexpr size_t kMaxVerdicts = 4096;

// Whether every result is one tensor, fresh or written into an argument
// (in-place or out=): views and lists are left to the synchronous path.
bool returns_single_tensors(const c10::FunctionSchema& schema) {
  for (const auto& ret : schema.returns()) {
    if (ret.type()->kind() != c10::TypeKind::TensorType ||
        (ret.alias_info() != nullptr && !ret.alias_info()->isWrite())) {
      return false;
    }
  }
  return !schema.returns().empty();
}

std::optional<std::vector<TensorSpec>> one_tensor_each(const OutputSpec& spec) {
  std::vector<TensorSpec> outputs;
  for (const auto& tensors : spec) {
    if (tensors.size() != 1 || !tensors[0].defined) {
      return std::nullopt;
    }
    outputs.push_back(tensors[0]);
  }
  return outputs;
}

// What a CPU sparse kernel's choice of result layout and shape rule can
// depend on, short of the sizes: a tensor's layout, dtype and rank (plus its
// sparse rank for COO and its values' rank, which holds the block and dense
// dimensions, for the compressed layouts), and every other argument's value.
void put_structure(std::string& key, const at::Tensor& t) {
  if (!t.defined()) {
    key += "U;";
    return;
  }
  key += c10::str(t.layout(), '/', t.scalar_type(), '/', t.dim(), '/', t.device().type());
  if (t.layout() == c10::kSparse) {
    key += c10::str('/', t.sparse_dim());
  } else if (is_sparse_layout(t)) {
    key += c10::str('/', t.values().dim());
  }
  key += ';';
}

std::string structure_key(const TranslatedOp& target, const std::vector<IValue>& args) {
  std::string key = c10::str(static_cast<const void*>(&target.caller_schema), '|');
  for (const auto& arg : args) {
    if (arg.isTensor()) {
      put_structure(key, arg.toTensor());
    } else if (arg.isTensorList()) {
      key += '[';
      for (const at::Tensor& t : arg.toTensorList()) {
        put_structure(key, t);
      }
      key += ']';
    } else {
      key += c10::str(arg, ';');
    }
  }
  return key;
}

// `args` with each sparse tensor replaced by a dense meta tensor of its sizes
// and dtype.
std::vector<IValue> with_dense_stand_ins(const std::vector<IValue>& args) {
  const auto stand_in = [](const at::Tensor& t) {
    return is_sparse_layout(t) ? at::empty(t.sizes(), at::TensorOptions().dtype(t.scalar_type()).device(c10::kMeta))
                               : t;
  };
  std::vector<IValue> out;
  out.reserve(args.size());
  for (const auto& arg : args) {
    if (arg.isTensor()) {
      out.emplace_back(stand_in(arg.toTensor()));
    } else if (arg.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : arg.toTensorList()) {
        list.push_back(stand_in(t));
      }
      out.emplace_back(std::move(list));
    } else {
      out.push_back(arg);
    }
  }
  return out;
}

std::optional<std::vector<TensorSpec>> stand_in_results(const TranslatedOp& target, const std::vector<IValue>& args) {
  const auto spec = infer_outputs(target, with_dense_stand_ins(args));
  return spec == nullptr ? std::nullopt : one_tensor_each(*spec);
}

// Whether the CPU kernel's result is the predicted one. A result written
// into an argument keeps that argument's strides, so only its sizes count.
bool matches(const IValue& result, const TensorSpec& spec, bool written_into_argument) {
  if (!result.isTensor()) {
    return false;
  }
  const at::Tensor& t = result.toTensor();
  return t.defined() && t.layout() == c10::kStrided && t.scalar_type() == spec.dtype &&
      t.sizes().equals(spec.sizes) && (written_into_argument || t.strides().equals(spec.strides));
}

// Per structure: whether the CPU kernel confirmed the dense stand-ins.
class Verdicts {
 public:
  std::optional<bool> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = verdicts_.find(key);
    return it == verdicts_.end() ? std::nullopt : std::optional<bool>(it->second);
  }

  void record(std::string key, bool confirmed) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (verdicts_.size() >= kMaxVerdicts) {
      verdicts_.clear(); // a program with this many sparse op structures relearns them
    }
    verdicts_.emplace(std::move(key), confirmed);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, bool> verdicts_;
};

Verdicts& verdicts() {
  static Verdicts instance;
  return instance;
}

} // namespace

std::optional<std::vector<TensorSpec>> dense_results_of_sparse_op(
    const TranslatedOp& target, const std::vector<IValue>& args) {
  if (!returns_single_tensors(target.caller_schema)) {
    return std::nullopt;
  }
  if (verdicts().find(structure_key(target, args)).value_or(false)) {
    return stand_in_results(target, args);
  }
  if (target.caller_schema.is_mutable()) {
    return std::nullopt; // the sparse meta path is for fresh results only
  }
  const auto spec = infer_outputs(target, args);
  // Null without a sparse meta kernel, with one that needs the data, or for
  // a sparse result.
  return spec == nullptr ? std::nullopt : one_tensor_each(*spec);
}

void confirm_dense_results(
    const TranslatedOp& target, const std::vector<IValue>& args, c10::ArrayRef<IValue> results) {
  if (!returns_single_tensors(target.caller_schema)) {
    return;
  }
  std::string key = structure_key(target, args);
  if (verdicts().find(key).has_value()) {
    return;
  }
  const auto predicted = stand_in_results(target, args);
  bool confirmed = predicted.has_value() && predicted->size() == results.size();
  const auto& returns = target.caller_schema.returns();
  for (size_t i = 0; confirmed && i < results.size(); ++i) {
    confirmed = matches(results[i], (*predicted)[i], returns[i].alias_info() != nullptr);
  }
  verdicts().record(std::move(key), confirmed);
}

} // namespace torch_npu_ops
