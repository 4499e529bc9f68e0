#include "ExecutionPlan.h"

#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <string_view>
#include <unordered_set>

#include "IValueTensors.h"
#include "OutVariants.h"
#include "PythonMetaWarmup.h"
#include "RangeFactoryOuts.h"
#include "SchemaAliases.h"

namespace torch_npu_ops {
namespace {

using c10::IValue;

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

// Ops whose result sizes depend on the values of their inputs: the host
// must wait for the data, as on CUDA (Note [Synchronizing operations],
// npu/SyncDebugMode.h).
bool sizes_depend_on_values(const c10::OperatorHandle& op, const std::vector<IValue>& args) {
  static const std::unordered_set<std::string_view> kNames = {
      "aten::nonzero", "aten::masked_select", "aten::_unique", "aten::_unique2",
      "aten::unique_dim", "aten::unique_consecutive", "aten::unique_dim_consecutive",
      "aten::argwhere", "aten::repeat_interleave", "aten::bincount",
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

// Ops that run synchronously for want of a meta kernel that gives the CPU
// kernel's outputs for these arguments: only the CPU kernel's will do.
bool meta_kernel_disagrees(const c10::OperatorHandle& op, const std::vector<IValue>& args) {
  static const std::unordered_set<std::string_view> kNames = {
      // Synchronous since the executor's first version; its result size is
      // `bins`, but with min == max its range comes from the data.
      "aten::histc",
      // The meta kernel sizes the auxiliary outputs (offset2bag, bag_size,
      // max_indices) for every mode; the CPU kernel leaves some empty, and
      // the backward reads them by their size: only the CPU's shapes do.
      "aten::_embedding_bag", "aten::_embedding_bag_forward_only",
  };
  const auto& name = op.schema().name();
  if (kNames.count(name) > 0) {
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
  return false;
}

// Ops whose output shapes only their CPU kernel knows.
bool is_data_dependent(const c10::OperatorHandle& op, const std::vector<IValue>& args) {
  return sizes_depend_on_values(op, args) || meta_kernel_disagrees(op, args);
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

// Whether every return is one fresh output whose spec is defined: only then
// can an out= overload, which takes one `out` tensor per return, write them.
bool only_fresh_outputs(const c10::FunctionSchema& schema, const OutputSpec& spec) {
  const auto& returns = schema.returns();
  size_t fresh = 0;
  for (size_t i = 0; i < returns.size() && i < spec.size(); ++i) {
    if (aliased_argument(schema, returns[i]) >= 0) {
      continue; // written into an argument, or a view of one
    }
    for (const TensorSpec& s : spec[i]) {
      if (!s.defined) {
        return false;
      }
      ++fresh;
    }
  }
  return fresh == returns.size();
}

} // namespace

ExecutionPlan plan_execution(const c10::OperatorHandle& op, const std::vector<IValue>& args) {
  const auto& schema = op.schema();
  ExecutionPlan plan{translate(op, args)};
  if (returns_only_tensors(schema) && !is_data_dependent(op, args)) {
    plan.outputs = infer_outputs(plan.target, args);
  }
  if (plan.outputs == nullptr) {
    plan.waits_for_values = sizes_depend_on_values(op, args);
    // No meta kernel, or one that needs the data: run synchronously, which
    // also reports genuine argument errors at the call site.
    TORCH_CHECK(
        !strict_mode() || is_data_dependent(op, args) || !returns_only_tensors(schema) ||
            !meta_kernels_ready(),
        "torch-npu-ops strict mode (TORCH_NPU_OPS_STRICT=1): ", schema.name(),
        " has no meta kernel for these arguments, so it would run synchronously. "
        "Unset TORCH_NPU_OPS_STRICT to allow it.");
    return plan;
  }
  // Note [Range factories keep an out of the right size]: their CPU kernel
  // resizes a filled out= of another length itself, with its own warning.
  if (resizes_an_overlapping_out(schema, args, *plan.outputs) ||
      resizes_a_filled_range_out(schema, args, *plan.outputs)) {
    plan.outputs = nullptr;
    return plan;
  }
  // A functional op with an out= overload writes straight into the npu
  // outputs; otherwise its host results are copied into them.
  if (!plan.target.adapt && only_fresh_outputs(schema, *plan.outputs)) {
    plan.out_op = out_variant(plan.target.op);
  }
  return plan;
}

} // namespace torch_npu_ops
