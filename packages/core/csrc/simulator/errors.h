// Error reporting: the thread-local "recent error message" that
// aclGetRecentErrMsg returns, and the message a piece of device work sets
// before failing (npuSimSetWorkError).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "acl_types.h"

namespace npu_sim {

// Sets the calling thread's recent error message and returns `code`, so
// that callers can write `return fail(ACL_ERROR_..., "...", ...)`.
aclError fail(aclError code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

void setRecentError(std::string message);

// Returns the calling thread's recent message and clears it. The pointer
// stays valid until the next call on this thread. Never null.
const char* takeRecentError();

// Message set by the running device work (npuSimSetWorkError).
void setWorkErrorMessage(const char* message);
std::string takeWorkErrorMessage();
bool hasWorkErrorMessage();

// A failure of device work, recorded on its stream until a synchronizing
// call reports it. Several reporters may hold it (the stream, and events
// recorded after the failure); `claim()` makes sure it is reported once.
struct WorkError {
  explicit WorkError(std::string m) : message(std::move(m)) {}
  std::string message;
  std::atomic<bool> reported{false};
  std::atomic<uint32_t> more{0}; // later failures on the same stream

  bool claim() {
    return !reported.exchange(true, std::memory_order_acq_rel);
  }
  std::string describe() const;
};

// Reports `error` (once, whoever asks first): sets the recent message and
// returns ACL_ERROR_RT_AICORE_EXCEPTION; ACL_SUCCESS when null or reported.
aclError reportWorkError(const std::shared_ptr<WorkError>& error);

} // namespace npu_sim
