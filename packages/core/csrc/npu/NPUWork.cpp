#include "npu/NPUWork.h"

#include <string>

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

void set_device_work_error(const char* message, const std::string* launched_from) {
  std::string text = message;
  if (launched_from != nullptr && !launched_from->empty()) {
    text += " (launched from " + *launched_from + ")";
  } else if (!launch_blocking()) {
    // Raised at a later synchronisation, far from the launching line.
    text += " (set ASCEND_LAUNCH_BLOCKING=1 to see the Python line that launched it)";
  }
  acl::api().npuSimSetWorkError(text.c_str());
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
