#include "DeviceChecks.h"

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>

#include <ATen/core/function_schema.h>
#include <c10/util/Exception.h>

#include "IValueTensors.h"

namespace torch_npu_ops {
namespace {

// (op, argument) pairs whose tensors may be host tensors of any size, as on
// CUDA.
constexpr std::pair<std::string_view, std::string_view> kHostArguments[] = {
    // Advanced indexing: CUDA moves host indices to the device itself.
    {"aten::index", "indices"},
    {"aten::_unsafe_index", "indices"},
    {"aten::index_put", "indices"},
    {"aten::index_put_", "indices"},
    {"aten::_index_put_impl_", "indices"},
    {"aten::_unsafe_index_put", "indices"},
    // Lengths that must be on the host (pack_padded_sequence requires it).
    {"aten::_pack_padded_sequence", "lengths"},
    {"aten::ctc_loss", "input_lengths"},
    {"aten::ctc_loss", "target_lengths"},
    {"aten::_ctc_loss", "input_lengths"},
    {"aten::_ctc_loss", "target_lengths"},
    {"aten::_ctc_loss_backward", "input_lengths"},
    {"aten::_ctc_loss_backward", "target_lengths"},
    // The scalars of the multi-tensor pointwise ops (Tensor overload): CUDA
    // reads them from a 1-d host tensor (it requires them on the CPU).
    {"aten::_foreach_addcmul", "scalars"},
    {"aten::_foreach_addcmul_", "scalars"},
    {"aten::_foreach_addcdiv", "scalars"},
    {"aten::_foreach_addcdiv_", "scalars"},
    // The nested sizes a nested tensor is made with: host metadata, as a
    // nested tensor's own are on every device (Note [Nested npu tensors]).
    {"aten::_nested_from_padded", "cpu_nested_shape_example"},
};

bool host_argument_allowed(std::string_view op, std::string_view argument) {
  for (const auto& [name, arg] : kHostArguments) {
    if (name == op && arg == argument) {
      return true;
    }
  }
  return false;
}

// "name.overload" of the aten ops CUDA calls without its device check.
const std::unordered_set<std::string_view>& device_check_free_ops() {
  static const std::unordered_set<std::string_view> ops{
#define TORCH_NPU_DEVICE_CHECK_FREE_OP(op) op,
#include "DeviceCheckFreeOps.inc"
#undef TORCH_NPU_DEVICE_CHECK_FREE_OP
  };
  return ops;
}

bool is_written(const c10::Argument& argument) {
  return argument.is_out() || (argument.alias_info() != nullptr && argument.alias_info()->isWrite());
}

[[noreturn]] void device_mismatch(c10::Device first, c10::Device second, const std::string& argument,
                                  const c10::FunctionSchema& schema) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", first,
              " and ", second, "! (when checking argument for argument ", argument, " in method ",
              schema.operator_name(), ")");
}

} // namespace

bool host_scalars_allowed(std::string_view name, std::string_view overload_name) {
#if TORCH_NPU_DEVICE_CHECK_FREE_OPS_KNOWN
  constexpr std::string_view aten = "aten::";
  if (name.substr(0, aten.size()) != aten) {
    return true;
  }
  std::string key(name.substr(aten.size()));
  if (!overload_name.empty()) {
    key.append(".").append(overload_name);
  }
  return device_check_free_ops().count(key) != 0;
#else
  (void)name;
  (void)overload_name;
  return true;
#endif
}

c10::Device checked_op_device(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  const auto& arguments = schema.arguments();
  // The npu device: the first npu tensor's (every other must agree).
  std::optional<c10::Device> device;
  for (size_t i = 0; i < args.size(); ++i) {
    for_each_tensor(args[i], [&](const at::Tensor& t) {
      if (!t.defined() || !t.device().is_privateuseone()) {
        return;
      }
      if (!device.has_value()) {
        device = t.device();
      } else if (*device != t.device()) {
        device_mismatch(*device, t.device(), arguments[i].name(), schema);
      }
    });
  }
  if (!device.has_value()) {
    for (const auto& arg : args) {
      if (arg.isDevice() && arg.toDevice().is_privateuseone()) {
        device = arg.toDevice();
        break;
      }
    }
  }
  TORCH_CHECK(device.has_value(), "torch-npu-ops: ", schema.name(),
              " was dispatched to npu without npu tensors or an npu device");
  // Host tensors: only where CUDA takes them.
  const std::string_view op = schema.name();
  const bool op_takes_scalars = host_scalars_allowed(op, schema.overload_name());
  for (size_t i = 0; i < args.size() && i < arguments.size(); ++i) {
    const c10::Argument& argument = arguments[i];
    const bool written = is_written(argument);
    // CUDA's wrapper checks positional and out= arguments only.
    const bool scalar_ok = !written && (op_takes_scalars || argument.kwarg_only());
    const bool any_size = !written && host_argument_allowed(op, argument.name());
    for_each_tensor(args[i], [&](const at::Tensor& t) {
      if (!t.defined() || t.device().is_privateuseone()) {
        return;
      }
      const bool scalar = t.device().is_cpu() && t.dim() == 0 && t.layout() == c10::kStrided;
      if ((scalar && scalar_ok) || (any_size && t.device().is_cpu())) {
        return;
      }
      device_mismatch(*device, t.device(), argument.name(), schema);
    });
  }
  return *device;
}

} // namespace torch_npu_ops
