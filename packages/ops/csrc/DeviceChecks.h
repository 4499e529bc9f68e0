// Which devices an op's tensor arguments may be on, checked at the call as
// CUDA checks them.
//
// An npu op takes npu tensors of one device. Host tensors are accepted only
// where CUDA accepts them: 0-dim inputs ("scalars", such as Python numbers
// wrapped by the argument parser) of the ops CUDA calls without its device
// check, and of keyword-only arguments (Note [Host scalars only where CUDA
// takes them]), and the few arguments meant to live on
// the host (the lengths of packed sequences and of CTC losses) or that CUDA
// moves itself (indices of advanced indexing). Anything else, a host out=
// argument or in-place self above all, raises "Expected all tensors to be
// on the same device" at the call, as on CUDA: device work must never write
// into host memory it does not own (it would, asynchronously, after the
// host may have freed it).
#pragma once

#include <string_view>
#include <vector>

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

namespace torch_npu_ops {

// Note [Host scalars only where CUDA takes them]
// CUDA's generated kernel wrappers check that every positional and out=
// tensor argument is on one device, a 0-dim CPU tensor too, unless the op's
// native_functions.yaml entry says `device_check: NoCheck` (TensorIterator
// ops such as add and mul, where, masked_fill, ... take CPU scalars). So
// torch.addmm(torch.tensor(2.), a, b) with npu a and b is refused at the call,
// as on CUDA, where npu used to take it. The list of such ops is generated at
// build time from the yaml of the torch built against
// (cmake/device_check_free_ops.py); ops outside aten keep taking scalars.
bool host_scalars_allowed(std::string_view name, std::string_view overload_name);

// The npu device the op runs on, after the checks above (raising on a
// violation); a device argument (factories) when there is no npu tensor.
c10::Device checked_op_device(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);

} // namespace torch_npu_ops
