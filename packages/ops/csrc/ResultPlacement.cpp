#include "ResultPlacement.h"

#include "ExecutionCounters.h"
#include "KernelAllocator.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace torch_npu_ops {
namespace {

// Below this a result is copied: the copy costs less than watching the
// kernel's allocations.
constexpr size_t kDefaultMinBytes = size_t{1} << 20;
// Signatures remembered; beyond this, new ones are copied (a workload of
// ever-changing shapes must not grow the table without bound).
constexpr size_t kMaxPlans = 4096;

// TORCH_NPU_OPS_RESULT_PLACEMENT=0 turns placement off;
// TORCH_NPU_OPS_RESULT_PLACEMENT_MIN_BYTES sets the smallest result placed
// (tests use 0 to place small results too).
bool placement_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("TORCH_NPU_OPS_RESULT_PLACEMENT");
    return env == nullptr || std::string_view(env) != "0";
  }();
  return enabled;
}

size_t min_bytes() {
  static const size_t bytes = [] {
    const char* env = std::getenv("TORCH_NPU_OPS_RESULT_PLACEMENT_MIN_BYTES");
    if (env == nullptr || *env == '\0') {
      return kDefaultMinBytes;
    }
    char* end = nullptr;
    const unsigned long long value = std::strtoull(env, &end, 10);
    TORCH_CHECK(
        end != nullptr && *end == '\0', "TORCH_NPU_OPS_RESULT_PLACEMENT_MIN_BYTES must be a number of bytes, got '",
        env, "'");
    return static_cast<size_t>(value);
  }();
  return bytes;
}

// What a signature's runs showed: for each output, the index (among the
// kernel's CPU allocations) and size of the allocation that became it.
struct Slot {
  int64_t allocation = -1;
  size_t bytes = 0;
};

struct Plan {
  bool placeable = false; // false: leave this signature alone
  std::vector<Slot> slots;
};

std::mutex g_plans_mutex;
std::unordered_map<uint64_t, Plan> g_plans;

void give_up(uint64_t signature) {
  std::lock_guard<std::mutex> lock(g_plans_mutex);
  g_plans[signature] = Plan{};
}

// An allocation lent the memory of an output, until the kernel frees it.
struct Lent {
  void* data;
  size_t bytes;
  bool released = false; // set by its deleter (KernelAllocator.h)
};

uint64_t mix(uint64_t h, uint64_t v) {
  return h ^ (v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2));
}

// Everything about an argument that can steer a CPU kernel's allocations:
// tensors by geometry (not values), scalars by value.
uint64_t hash_argument(uint64_t h, const c10::IValue& v) {
  h = mix(h, std::hash<std::string>()(v.tagKind()));
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      return mix(h, 1);
    }
    h = mix(h, static_cast<uint64_t>(t.scalar_type()));
    h = mix(h, static_cast<uint64_t>(t.layout()));
    for (const int64_t s : t.sizes()) {
      h = mix(h, static_cast<uint64_t>(s));
    }
    for (const int64_t s : t.strides()) {
      h = mix(h, static_cast<uint64_t>(s) * 31);
    }
    h = mix(h, static_cast<uint64_t>(t.storage_offset()));
    h = mix(h, (t.is_conj() ? 2 : 0) | (t.is_neg() ? 4 : 0));
    // oneDNN picks its path by the alignment of the buffers too.
    return t.has_storage() ? mix(h, reinterpret_cast<uintptr_t>(t.data_ptr()) % 64) : h;
  }
  if (v.isList()) {
    const auto list = v.toListRef();
    h = mix(h, list.size());
    for (const c10::IValue& element : list) {
      h = hash_argument(h, element);
    }
    return h;
  }
  if (v.isInt()) {
    return mix(h, static_cast<uint64_t>(v.toInt()));
  }
  if (v.isDouble()) {
    const double d = v.toDouble();
    uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof(bits));
    return mix(h, bits);
  }
  if (v.isBool()) {
    return mix(h, v.toBool() ? 3 : 5);
  }
  if (v.isString()) {
    return mix(h, std::hash<std::string_view>()(v.toStringView()));
  }
  return h; // None, devices, generators, ...: the tag is enough
}

bool same_geometry(const at::Tensor& result, const at::Tensor& output) {
  return result.layout() == c10::kStrided && result.scalar_type() == output.scalar_type() &&
      result.sizes().equals(output.sizes()) && result.strides().equals(output.strides()) && !result.is_conj() &&
      !result.is_neg();
}

} // namespace

struct ResultPlacement::Scope final : KernelAllocationLender {
  uint64_t signature = 0;
  std::string op_name;
  std::vector<at::Tensor> outputs;
  std::vector<bool> large;
  bool learning = false;
  std::vector<Slot> slots; // when not learning: the plan

  struct Seen {
    int64_t allocation;
    size_t bytes;
    void* data;
  };
  std::vector<Seen> seen; // when learning: the large allocations
  size_t smallest_output = 0;

  std::vector<std::unique_ptr<Lent>> lent; // by output (null: not lent)
  KernelAllocationScope* allocations = nullptr;

  c10::DataPtr lend(int64_t index, size_t bytes) override {
    if (learning) {
      return {};
    }
    for (size_t k = 0; k < slots.size(); ++k) {
      if (slots[k].allocation == index && slots[k].bytes == bytes && lent[k] == nullptr) {
        void* data = outputs[k].data_ptr();
        lent[k] = std::make_unique<Lent>(Lent{data, bytes});
        return lend_memory(data, &lent[k]->released);
      }
    }
    return {};
  }

  void allocated(int64_t index, size_t bytes, void* data) override {
    if (learning && bytes >= smallest_output && data != nullptr) {
      seen.push_back(Seen{index, bytes, data});
    }
  }

  // Whether `t` lives in memory lent to this run.
  bool in_lent_memory(const at::Tensor& t) const {
    const auto* data = static_cast<const char*>(t.storage().data());
    for (const auto& l : lent) {
      if (l != nullptr && data >= static_cast<const char*>(l->data) &&
          data < static_cast<const char*>(l->data) + l->bytes) {
        return true;
      }
    }
    return false;
  }

  void learn(const std::vector<at::Tensor>& results) {
    Plan plan;
    plan.slots.resize(outputs.size());
    for (size_t k = 0; k < outputs.size() && k < results.size(); ++k) {
      const at::Tensor& r = results[k];
      if (!large[k] || !r.defined() || r.storage_offset() != 0 || !same_geometry(r, outputs[k])) {
        continue;
      }
      // The latest allocation at that address is the live one.
      for (auto it = seen.rbegin(); it != seen.rend(); ++it) {
        if (it->data != r.storage().data()) {
          continue;
        }
        const bool taken = std::any_of(plan.slots.begin(), plan.slots.end(),
                                       [&](const Slot& s) { return s.allocation == it->allocation; });
        if (!taken && it->bytes <= outputs[k].storage().nbytes()) {
          plan.slots[k] = Slot{it->allocation, it->bytes};
          plan.placeable = true;
        }
        break;
      }
    }
    std::lock_guard<std::mutex> lock(g_plans_mutex);
    if (g_plans.size() < kMaxPlans) {
      g_plans.emplace(signature, std::move(plan));
    }
  }

  // Stops lending; true if every lent allocation was given back.
  bool detach() {
    if (allocations != nullptr) {
      allocations->set_lender(nullptr);
      allocations = nullptr;
    }
    bool all_given_back = true;
    for (auto& l : lent) {
      if (l != nullptr) {
        all_given_back &= forget_lent(l->data);
        l.reset();
      }
    }
    return all_given_back;
  }
};

ResultPlacement::ResultPlacement(const c10::OperatorHandle& op, const std::vector<c10::IValue>& arguments,
                                 const std::vector<at::Tensor>& outputs, KernelAllocationScope& allocations) {
  if (!placement_enabled()) {
    return;
  }
  std::vector<bool> large(outputs.size(), false);
  size_t smallest = SIZE_MAX;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const at::Tensor& out = outputs[k];
    const size_t bytes = out.defined() ? out.storage().nbytes() : 0;
    if (bytes > 0 && bytes >= min_bytes() && out.data_ptr() != nullptr) {
      large[k] = true;
      smallest = std::min(smallest, bytes);
    }
  }
  if (smallest == SIZE_MAX) {
    return;
  }
  const auto& schema = op.schema();
  uint64_t signature = mix(std::hash<std::string>()(schema.name()), std::hash<std::string>()(schema.overload_name()));
  for (const c10::IValue& argument : arguments) {
    signature = hash_argument(signature, argument);
  }
  for (const at::Tensor& out : outputs) {
    signature = hash_argument(signature, out);
  }

  auto scope = std::make_unique<Scope>();
  {
    std::lock_guard<std::mutex> lock(g_plans_mutex);
    const auto it = g_plans.find(signature);
    if (it == g_plans.end()) {
      if (g_plans.size() >= kMaxPlans) {
        return;
      }
      scope->learning = true;
    } else if (!it->second.placeable) {
      return;
    } else {
      scope->slots = it->second.slots;
    }
  }
  scope->signature = signature;
  scope->op_name = schema.name();
  scope->outputs = outputs;
  scope->large = std::move(large);
  scope->smallest_output = smallest;
  scope->lent.resize(outputs.size());
  scope->allocations = &allocations;
  allocations.set_lender(scope.get());
  scope_ = std::move(scope);
}

ResultPlacement::~ResultPlacement() {
  if (scope_ != nullptr) {
    scope_->detach();
  }
}

std::vector<at::Tensor> ResultPlacement::resolve(std::vector<at::Tensor> results) {
  if (scope_ == nullptr) {
    return results;
  }
  Scope& scope = *scope_;
  // Allocations after the kernel (clones below) are not the kernel's.
  if (scope.allocations != nullptr) {
    scope.allocations->set_lender(nullptr);
    scope.allocations = nullptr;
  }
  if (scope.learning) {
    scope.learn(results);
    return results;
  }
  bool mismatch = false;
  for (size_t k = 0; k < results.size() && k < scope.outputs.size(); ++k) {
    at::Tensor& r = results[k];
    if (!r.defined()) {
      continue;
    }
    if (scope.lent[k] != nullptr && r.data_ptr() == scope.outputs[k].data_ptr() &&
        same_geometry(r, scope.outputs[k])) {
      r = at::Tensor(); // already in place
      count_result(ResultDelivery::Placed);
      continue;
    }
    mismatch |= scope.slots[k].allocation >= 0;
    if (scope.in_lent_memory(r)) {
      r = r.clone();
    }
  }
  if (mismatch) {
    give_up(scope.signature);
  }
  return results;
}

void ResultPlacement::close() {
  if (scope_ == nullptr) {
    return;
  }
  const bool kept = !scope_->detach();
  const uint64_t signature = scope_->signature;
  const std::string op_name = scope_->op_name;
  scope_.reset();
  if (kept) {
    give_up(signature);
    TORCH_CHECK(
        false, "torch-npu-ops: the CPU kernel of ", op_name, " still holds memory lent to it from its npu output "
        "after returning, so that output may be overwritten later. This is a bug in torch-npu-ops' result "
        "placement; please report it, and set TORCH_NPU_OPS_RESULT_PLACEMENT=0 to work around it.");
  }
}

} // namespace torch_npu_ops
