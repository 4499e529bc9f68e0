// The extern "C" simulator extensions of npu_sim_ext.h.
#pragma GCC visibility push(default)
#include "npu_sim_ext.h"
#pragma GCC visibility pop

#include "api_guard.h"
#include "api_impl.h"

using npu_sim::guarded;
namespace impl = npu_sim::impl;

extern "C" {

NPU_SIM_EXPORT aclError npuSimLaunchWork(aclrtStream stream, const npuSimWork* work,
                                         uint64_t* workId) {
  return guarded("npuSimLaunchWork", [&] { return impl::launchWork(stream, work, workId); });
}

NPU_SIM_EXPORT void npuSimSetWorkError(const char* message) {
  try {
    npu_sim::setWorkErrorMessage(message);
  } catch (const std::bad_alloc&) {
    // No memory for the message: the failure is still reported, by code.
  }
}

NPU_SIM_EXPORT aclError npuSimGetHostAccessOffset(intptr_t* offset) {
  return guarded("npuSimGetHostAccessOffset", [&] { return impl::getHostAccessOffset(offset); });
}

NPU_SIM_EXPORT aclError npuSimStreamGetDevice(aclrtStream stream, int32_t* deviceId) {
  return guarded("npuSimStreamGetDevice", [&] { return impl::streamGetDevice(stream, deviceId); });
}

NPU_SIM_EXPORT const char* npuSimDescribe(void) {
  return impl::describe();
}

} // extern "C"
