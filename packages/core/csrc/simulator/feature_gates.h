// Features that depend on the emulated CANN release (NPU_SIM_CANN_VERSION).
// Which release introduced what is data of the compatibility matrix
// (compat/cann_features.toml), generated into cann_feature_table.inc.
#pragma once

#include "acl_types.h"

namespace npu_sim {

enum class Feature {
#define NPU_SIM_CANN_FEATURE(enumerator, name, description, since) enumerator,
#include "cann_feature_table.inc"
#undef NPU_SIM_CANN_FEATURE
};

// ACL_SUCCESS when the emulated CANN has `feature`; otherwise
// ACL_ERROR_RT_FEATURE_NOT_SUPPORT with a message naming the feature, the
// emulated version and the version that introduced it.
aclError requireFeature(Feature feature, const char* api);

bool hasFeature(Feature feature);

} // namespace npu_sim
