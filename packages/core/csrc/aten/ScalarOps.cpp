// fill_, zero_ and _local_scalar_dense (tensor.item()) on npu, and
// tensor.record_stream(). Fill runs as device work; item() waits for the
// stream, since the host needs the value.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include "aten/DeviceTensorView.h"
#include "npu/NPUCachingAllocator.h"
#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUStream.h"
#include "npu/NPUWork.h"
#include "npu/SyncDebugMode.h"
#include "npu/WorkAccesses.h"
#include "npu/impl/AclInterface.h"

namespace c10_npu::aten {
namespace {

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) {
    return self;
  }
  const NPUGuard guard(self.device());
  WorkAccessScope accesses;
  accesses.write(self);
  launch_host_work(
      getCurrentNPUStream(self.device().index()), "aten::fill_",
      [self = TensorDesc(self), value] { self.cpu_view().fill_(value); });
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(
      value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
      value.dim(), " dimensions.");
  if (!value.device().is_privateuseone()) {
    return fill_scalar(self, value.item());
  }
  if (self.numel() == 0) {
    return self;
  }
  TORCH_CHECK(
      value.device() == self.device(), "fill_: the value is on ", value.device(),
      " but the tensor is on ", self.device());
  const NPUGuard guard(self.device());
  // Read the value on the device, in stream order: no host synchronisation.
  WorkAccessScope accesses;
  accesses.read(value);
  accesses.write(self);
  launch_host_work(
      getCurrentNPUStream(self.device().index()), "aten::fill_",
      [self = TensorDesc(self), value = TensorDesc(value)] {
        self.cpu_view().fill_(value.cpu_view().item());
      });
  return self;
}

at::Tensor& zero(at::Tensor& self) {
  if (self.numel() == 0) {
    return self;
  }
  const NPUGuard guard(self.device());
  const NPUStream stream = getCurrentNPUStream(self.device().index());
  if (self.is_non_overlapping_and_dense()) {
    // Every dtype's zero is all-zero bytes (the bits types included, which
    // fill_ does not take): one runtime memset over the tensor's memory.
    const size_t nbytes = static_cast<size_t>(self.numel()) * self.element_size();
    ensure_device_context(self.device().index());
    NPU_CHECK(acl::api().aclrtMemsetAsync(self.data_ptr(), nbytes, 0, nbytes, stream.stream()));
    if (launch_blocking()) {
      stream.synchronize();
    }
    return self;
  }
  WorkAccessScope accesses;
  accesses.write(self);
  launch_host_work(stream, "aten::zero_", [self = TensorDesc(self)] { self.cpu_view().zero_(); });
  return self;
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(
      self.numel() == 1, "a Tensor with ", self.numel(),
      " elements cannot be converted to Scalar");
  // Before the copy is queued: an error leaves no work writing into `host`.
  warn_or_error_on_sync(); // Note [Synchronizing operations]
  const NPUGuard guard(self.device());
  const NPUStream stream = getCurrentNPUStream(self.device().index());
  at::Tensor host = at::empty({}, self.options().device(c10::DeviceType::CPU));
  ensure_device_context(self.device().index());
  NPU_CHECK(acl::api().aclrtMemcpyAsync(
      host.mutable_data_ptr(), self.element_size(), self.const_data_ptr(),
      self.element_size(), ACL_MEMCPY_DEVICE_TO_HOST, stream.stream()));
  stream.synchronize();
  return host.item();
}

void record_stream(at::Tensor& self, c10::Stream stream) {
  NPUCachingAllocator::recordStream(self.storage().data_ptr(), NPUStream(stream));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor));
  m.impl("zero_", TORCH_FN(zero));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("record_stream", TORCH_FN(record_stream));
}

} // namespace c10_npu::aten
