#include "errors.h"

#include <cstdarg>

#include "util.h"

namespace npu_sim {
namespace {

struct ThreadErrors {
  std::string pending;  // not read yet
  std::string returned; // handed out by the last takeRecentError
  std::string work;     // npuSimSetWorkError of the running work
  bool has_work = false;
};

ThreadErrors& threadErrors() {
  thread_local ThreadErrors errors;
  return errors;
}

} // namespace

aclError fail(aclError code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  setRecentError(vstrFormat(fmt, args));
  va_end(args);
  return code;
}

void setRecentError(std::string message) {
  threadErrors().pending = std::move(message);
}

const char* takeRecentError() {
  ThreadErrors& errors = threadErrors();
  errors.returned = std::move(errors.pending);
  errors.pending.clear();
  return errors.returned.c_str();
}

void setWorkErrorMessage(const char* message) {
  ThreadErrors& errors = threadErrors();
  errors.work = message ? message : "";
  errors.has_work = true;
}

std::string takeWorkErrorMessage() {
  ThreadErrors& errors = threadErrors();
  errors.has_work = false;
  return std::move(errors.work);
}

bool hasWorkErrorMessage() {
  return threadErrors().has_work;
}

std::string WorkError::describe() const {
  const uint32_t n = more.load(std::memory_order_relaxed);
  if (n == 0) {
    return message;
  }
  return strFormat("%s (and %u later device work failure%s on the same stream)",
                   message.c_str(), n, n == 1 ? "" : "s");
}

aclError reportWorkError(const std::shared_ptr<WorkError>& error) {
  if (error == nullptr || !error->claim()) {
    return ACL_SUCCESS;
  }
  setRecentError(error->describe());
  return ACL_ERROR_RT_AICORE_EXCEPTION;
}

} // namespace npu_sim
