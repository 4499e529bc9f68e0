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

// requireFeature without logging the question (Note [Which tests reach CANN's
// features]): for a question whose refusal the caller reads as the answer the
// release with the feature gives in the common case, like "is this stream
// capturing?" (torch_npu reads a refusal as "no"). The caller logs with
// noteFeatureQuestion when its answer is another one.
aclError requireFeatureUnlogged(Feature feature, const char* api);
void noteFeatureQuestion(Feature feature);

} // namespace npu_sim
