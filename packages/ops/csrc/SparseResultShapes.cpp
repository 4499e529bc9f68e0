#include "SparseResultShapes.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <unordered_map>

#include <ATen/ops/empty.h>
#include <c10/util/StringUtil.h>

#include "IValueTensors.h"
#include "SparseTensors.h"

namespace torch_npu_ops {

// A dense result's memory layout, as the order of its dimensions from the
// outermost (largest stride) to the innermost. The CPU's sparse kernels do
// not always return what the dense product's meta kernel would (dense @ COO
// is column-major), so the layout is learnt from the CPU result instead.
using DimOrder = c10::SmallVector<int64_t, 6>;

// What the CPU kernel showed for one structure: whether its results are the
// stand-ins' (dense, same sizes and dtypes), and in which layout it returned
// each fresh one (empty for results written into an argument, which keep
// the argument's strides).
struct SparseResultVerdict {
  bool confirmed = false;
  std::vector<DimOrder> layouts;
};

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

void put_argument(std::string& key, const IValue& v) {
  if (v.isTensor()) {
    put_structure(key, v.toTensor());
  } else if (v.isList()) {
    key += '[';
    for (const IValue& element : v.toList()) {
      put_argument(key, element);
    }
    key += ']';
  } else {
    key += c10::str(v, ';');
  }
}

std::string structure_key(const TranslatedOp& target, const std::vector<IValue>& args) {
  std::string key = c10::str(static_cast<const void*>(&target.caller_schema), '|');
  for (const auto& arg : args) {
    put_argument(key, arg);
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
    out.push_back(map_tensors(arg, stand_in));
  }
  return out;
}

std::optional<std::vector<TensorSpec>> stand_in_results(const TranslatedOp& target, const std::vector<IValue>& args) {
  const auto spec = infer_outputs(target, with_dense_stand_ins(args));
  return spec == nullptr ? std::nullopt : one_tensor_each(*spec);
}

DimOrder dim_order(const at::Tensor& t) {
  DimOrder order(static_cast<size_t>(t.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  return order;
}

void lay_out(TensorSpec& spec, const DimOrder& order) {
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    spec.strides[*it] = stride;
    stride *= std::max<int64_t>(spec.sizes[*it], 1);
  }
}

// Whether the CPU kernel's result is the predicted one; sets the layout it
// chose for a fresh result.
bool matches(const IValue& result, const TensorSpec& spec, bool written_into_argument, DimOrder& layout) {
  if (!result.isTensor()) {
    return false;
  }
  const at::Tensor& t = result.toTensor();
  if (!t.defined() || t.layout() != c10::kStrided || t.scalar_type() != spec.dtype || !t.sizes().equals(spec.sizes)) {
    return false;
  }
  if (!written_into_argument) {
    if (!t.is_non_overlapping_and_dense()) {
      return false;
    }
    layout = dim_order(t);
  }
  return true;
}

// Per structure key: what the first call showed.
class Verdicts {
 public:
  std::shared_ptr<const SparseResultVerdict> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = verdicts_.find(key);
    return it == verdicts_.end() ? nullptr : it->second;
  }

  void record(std::string key, SparseResultVerdict verdict) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (verdicts_.size() >= kMaxVerdicts) {
      verdicts_.clear(); // a program with this many sparse op structures relearns them
    }
    verdicts_.emplace(std::move(key), std::make_shared<const SparseResultVerdict>(std::move(verdict)));
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const SparseResultVerdict>> verdicts_;
};

Verdicts& verdicts() {
  static Verdicts instance;
  return instance;
}

} // namespace

SparseOpResults::SparseOpResults(const TranslatedOp& target, const std::vector<IValue>& args)
    : target_(target), args_(args), single_tensors_(returns_single_tensors(target.caller_schema)) {
  if (single_tensors_) {
    key_ = structure_key(target, args);
    verdict_ = verdicts().find(key_);
  }
}

std::optional<std::vector<TensorSpec>> SparseOpResults::predict() const {
  if (!single_tensors_) {
    return std::nullopt;
  }
  if (verdict_ != nullptr && verdict_->confirmed) {
    auto specs = stand_in_results(target_, args_);
    const auto& returns = target_.caller_schema.returns();
    for (size_t i = 0; specs.has_value() && i < specs->size(); ++i) {
      if (returns[i].alias_info() != nullptr) {
        continue; // written into its argument, with the argument's strides
      }
      if (verdict_->layouts[i].size() != (*specs)[i].sizes.size()) {
        return std::nullopt; // another rank than the confirmed call's
      }
      lay_out((*specs)[i], verdict_->layouts[i]); // the CPU's layout
    }
    return specs;
  }
  if (target_.caller_schema.is_mutable()) {
    return std::nullopt; // the sparse meta path is for fresh results only
  }
  const auto spec = infer_outputs(target_, args_);
  // Null without a sparse meta kernel, with one that needs the data, or for
  // a sparse result.
  return spec == nullptr ? std::nullopt : one_tensor_each(*spec);
}

void SparseOpResults::learn(c10::ArrayRef<IValue> results) const {
  if (!single_tensors_ || verdict_ != nullptr) {
    return;
  }
  const auto predicted = stand_in_results(target_, args_);
  SparseResultVerdict verdict;
  verdict.confirmed = predicted.has_value() && predicted->size() == results.size();
  verdict.layouts.resize(results.size());
  const auto& returns = target_.caller_schema.returns();
  for (size_t i = 0; verdict.confirmed && i < results.size(); ++i) {
    verdict.confirmed = matches(results[i], (*predicted)[i], returns[i].alias_info() != nullptr, verdict.layouts[i]);
  }
  verdicts().record(key_, std::move(verdict));
}

} // namespace torch_npu_ops
