#include "npu/NPUWork.h"

#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"

namespace c10_npu {

intptr_t host_access_offset() {
  static const intptr_t offset = [] {
    intptr_t value = 0;
    if (acl::api().npuSimGetHostAccessOffset != nullptr) {
      NPU_CHECK(acl::api().npuSimGetHostAccessOffset(&value));
    }
    return value;
  }();
  return offset;
}

uint64_t launch_work(const NPUStream& stream, const npuSimWork& work) {
  const auto& api = acl::api();
  TORCH_CHECK(
      api.npuSimLaunchWork != nullptr, "Device work '", work.name,
      "' needs the NPU simulator's host-work launcher, which the CANN runtime "
      "does not have; this kernel has no CANN implementation yet.");
  ensure_device_context(stream.device_index());
  uint64_t id = 0;
  const aclError err = api.npuSimLaunchWork(stream.stream(), &work, &id);
  if (err != ACL_SUCCESS) {
    // Not enqueued: the work item is still ours to release.
    if (work.release != nullptr) {
      work.release(work.ctx);
    }
    NPU_CHECK(err);
  }
  if (launch_blocking()) {
    stream.synchronize();
  }
  return id;
}

} // namespace c10_npu
