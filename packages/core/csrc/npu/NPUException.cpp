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
  TORCH_CHECK(
      false, "NPU error: ", detail, " [", acl::error_name(error), " (", error,
      ") from ", call, " at ", file, ":", line, "]");
}

void warn_acl_error(aclError error, const char* call) {
  TORCH_WARN(
      "NPU error ignored: ", recent_message(), " [", acl::error_name(error),
      " (", error, ") from ", call, "]");
}

} // namespace c10_npu
