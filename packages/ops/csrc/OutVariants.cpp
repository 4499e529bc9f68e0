#include "OutVariants.h"

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace torch_npu_ops {
namespace {

bool returns_single_tensors(const c10::FunctionSchema& schema) {
  for (const auto& ret : schema.returns()) {
    if (ret.type()->kind() != c10::TypeKind::TensorType || ret.alias_info() != nullptr) {
      return false;
    }
  }
  return !schema.returns().empty();
}

bool is_out_variant_of(const c10::FunctionSchema& candidate, const c10::FunctionSchema& functional) {
  const auto& args = functional.arguments();
  const auto& cargs = candidate.arguments();
  if (cargs.size() != args.size() + functional.returns().size() ||
      candidate.returns().size() != functional.returns().size()) {
    return false;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (cargs[i].name() != args[i].name() || *cargs[i].type() != *args[i].type()) {
      return false;
    }
  }
  for (size_t i = args.size(); i < cargs.size(); ++i) {
    if (!cargs[i].is_out() || cargs[i].type()->kind() != c10::TypeKind::TensorType) {
      return false;
    }
  }
  return true;
}

// Overload names of every registered op, by op name.
const std::unordered_map<std::string, std::vector<c10::OperatorName>>& overloads_by_name() {
  static const auto index = [] {
    std::unordered_map<std::string, std::vector<c10::OperatorName>> map;
    for (auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
      map[name.name].push_back(name);
    }
    return map;
  }();
  return index;
}

std::mutex g_cache_mutex;
// Functional schema -> its out= overload (or none). Entries live as long as
// the process, like the schemas they point to.
std::unordered_map<const c10::FunctionSchema*, std::optional<c10::OperatorHandle>> g_cache;

// The first other overload of `schema`'s op that `accepts`.
template <typename Accepts>
std::optional<c10::OperatorHandle> other_overload(const c10::FunctionSchema& schema, const Accepts& accepts) {
  const auto& index = overloads_by_name();
  auto candidates = index.find(schema.name());
  if (candidates == index.end()) {
    return std::nullopt;
  }
  for (const auto& name : candidates->second) {
    if (name.overload_name == schema.overload_name()) {
      continue;
    }
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (handle.has_value() && accepts(*handle)) {
      return handle;
    }
  }
  return std::nullopt;
}

} // namespace

void ResizedOutputWatch::process(const c10::Warning& warning) {
  // The text of at::native::resize_output's deprecation warning.
  if (warning.msg().find("was resized since it had shape") != std::string::npos) {
    resized_ = true;
    return;
  }
  previous_->process(warning);
}

void deny_out_variant(const c10::OperatorHandle& op) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_cache[&op.schema()] = std::nullopt;
}

std::optional<c10::OperatorHandle> out_variant(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  auto it = g_cache.find(&schema);
  if (it != g_cache.end()) {
    return it->second;
  }
  std::optional<c10::OperatorHandle> found;
  if (!schema.is_mutable() && returns_single_tensors(schema)) {
    // Only an out= kernel of the CPU's own writes into its argument. One
    // that exists only as a composite kernel is mostly PyTorch's generated
    // "run the functional op, copy into out" (convolution.out): the
    // executor's own copy of the functional result is faster.
    found = other_overload(schema, [&](const c10::OperatorHandle& handle) {
      return is_out_variant_of(handle.schema(), schema) && handle.hasKernelForDispatchKey(c10::DispatchKey::CPU);
    });
  }
  g_cache.emplace(&schema, found);
  return found;
}

std::optional<c10::OperatorHandle> functional_variant(const c10::OperatorHandle& out_op) {
  static std::mutex mutex;
  static std::unordered_map<const c10::FunctionSchema*, std::optional<c10::OperatorHandle>> cache;
  const c10::FunctionSchema& schema = out_op.schema();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(&schema);
  if (it != cache.end()) {
    return it->second;
  }
  const std::optional<c10::OperatorHandle> found = other_overload(schema, [&](const c10::OperatorHandle& handle) {
    return !handle.schema().is_mutable() && returns_single_tensors(handle.schema()) &&
        is_out_variant_of(schema, handle.schema());
  });
  cache.emplace(&schema, found);
  return found;
}

} // namespace torch_npu_ops
