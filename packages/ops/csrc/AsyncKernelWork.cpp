#include "AsyncKernelWork.h"

#include <ATen/ops/empty.h>

#include <cstring>
#include <exception>
#include <optional>

#include "ExecutionCounters.h"
#include "IValueTensors.h"
#include "KernelAllocator.h"
#include "KernelArguments.h"
#include "OutVariants.h"
#include "ResultCopy.h"
#include "ResultPlacement.h"

namespace torch_npu_ops {

using torch::jit::Stack;

void OutVariantWork::operator()() const {
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
}

void OpKernelWork::operator()() const {
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
}

} // namespace torch_npu_ops
