// The extern "C" simulator extensions of npu_sim_ext.h.
#pragma GCC visibility push(default)
#include "npu_sim_ext.h"
#pragma GCC visibility pop

#include "activity.h"
#include "api_guard.h"
#include "api_impl.h"
#include "errors.h"
#include "race_detector.h"

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

NPU_SIM_EXPORT aclError npuSimActivityEnable(int enable) {
  npu_sim::activity::setEnabled(enable != 0);
  return ACL_SUCCESS;
}

NPU_SIM_EXPORT aclError npuSimActivityPushCorrelationId(uint64_t id) {
  return guarded("npuSimActivityPushCorrelationId", [&] {
    npu_sim::activity::pushCorrelation(id);
    return ACL_SUCCESS;
  });
}

NPU_SIM_EXPORT aclError npuSimActivityPopCorrelationId(uint64_t* id) {
  return guarded("npuSimActivityPopCorrelationId", [&] {
    uint64_t top = 0;
    if (id == nullptr) {
      return npu_sim::fail(ACL_ERROR_INVALID_PARAM, "npuSimActivityPopCorrelationId: id is null");
    }
    if (!npu_sim::activity::popCorrelation(&top)) {
      return npu_sim::fail(ACL_ERROR_INVALID_PARAM,
                           "npuSimActivityPopCorrelationId: this thread pushed no correlation id");
    }
    *id = top;
    return ACL_SUCCESS;
  });
}

NPU_SIM_EXPORT aclError npuSimActivityFlush(npuSimActivityRecord* records, size_t capacity,
                                            size_t* count) {
  return guarded("npuSimActivityFlush", [&] {
    if (count == nullptr || (records == nullptr && capacity != 0)) {
      return npu_sim::fail(ACL_ERROR_INVALID_PARAM, "npuSimActivityFlush: %s is null",
                           count == nullptr ? "count" : "records");
    }
    *count = npu_sim::activity::flush(records, capacity);
    return ACL_SUCCESS;
  });
}

NPU_SIM_EXPORT aclError npuSimLaunchWorkWithAccesses(aclrtStream stream, const npuSimWork* work,
                                                     const npuSimMemAccess* accesses,
                                                     size_t count, uint64_t* workId) {
  return guarded("npuSimLaunchWorkWithAccesses",
                 [&] { return impl::launchWork(stream, work, accesses, count, workId); });
}

NPU_SIM_EXPORT aclError npuSimRaceCheckEnable(int enable) {
  npu_sim::race::setEnabled(enable != 0);
  return ACL_SUCCESS;
}

NPU_SIM_EXPORT aclError npuSimRaceCheckEnabled(int* enabled) {
  if (enabled == nullptr) {
    return npu_sim::fail(ACL_ERROR_INVALID_PARAM, "npuSimRaceCheckEnabled: enabled is null");
  }
  return guarded("npuSimRaceCheckEnabled", [&] {
    npu_sim::race::applyConfig();
    *enabled = npu_sim::race::enabled() ? 1 : 0;
    return ACL_SUCCESS;
  });
}

NPU_SIM_EXPORT aclError npuSimSynchronizeStreamUnordered(aclrtStream stream) {
  return guarded("npuSimSynchronizeStreamUnordered",
                 [&] { return impl::synchronizeStream(stream, /*ordersHost=*/false); });
}

NPU_SIM_EXPORT aclError npuSimRaceCheckSetSiteProvider(npuSimLaunchSiteFn provider) {
  npu_sim::race::setSiteProvider(provider);
  return ACL_SUCCESS;
}

NPU_SIM_EXPORT const char* npuSimDescribe(void) {
  return impl::describe();
}

} // extern "C"
