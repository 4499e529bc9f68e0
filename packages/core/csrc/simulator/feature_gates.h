// Features that depend on the emulated CANN version (NPU_SIM_CANN_VERSION).
// The table of which version introduced what lives in feature_gates.cpp.
#pragma once

#include "acl_types.h"

namespace npu_sim {

enum class Feature {
  kVirtualMemory, // aclrtReserveMemAddress, aclrtMallocPhysical, aclrtMapMem, ...
};

// ACL_SUCCESS when the emulated CANN has `feature`; otherwise
// ACL_ERROR_RT_FEATURE_NOT_SUPPORT with a message naming the feature, the
// emulated version and the version that introduced it.
aclError requireFeature(Feature feature, const char* api);

bool hasFeature(Feature feature);

} // namespace npu_sim
