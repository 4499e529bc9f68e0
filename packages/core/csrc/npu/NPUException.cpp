#include "npu/NPUException.h"
#include "npu/impl/AclInterface.h"

#include <string>

namespace c10_npu {
namespace {

std::string recent_message() {
  const char* msg = acl::api().aclGetRecentErrMsg();
  return (msg != nullptr && msg[0] != '\0') ? std::string(msg) : std::string();
}

} // namespace

void throw_acl_error(aclError error, const char* call, const char* file, int line) {
  std::string detail = recent_message();
  if (detail.empty()) {
    detail = "the NPU runtime gave no further detail";
  }
  // Note [Stream capture] (NPUGraphsUtils.h): say what to do in torch's terms.
  const bool capture = error == ACL_ERROR_RT_STREAM_CAPTURED || error == ACL_ERROR_RT_EVENT_CAPTURED;
  TORCH_CHECK(
      false, "NPU error: ", detail, " [", acl::error_name(error), " (", error,
      ") from ", call, " at ", file, ":", line, "]",
      capture ? ". While a graph is being captured, do not synchronise with the device: no "
                "torch.npu.synchronize(), .item(), .cpu(), printing npu tensors, ops whose output "
                "size depends on data (nonzero, masked_select, unique) or empty_cache(); move them "
                "before or after the capture."
              : "");
}

void warn_acl_error(aclError error, const char* call) {
  TORCH_WARN(
      "NPU error ignored: ", recent_message(), " [", acl::error_name(error),
      " (", error, ") from ", call, "]");
}

} // namespace c10_npu
