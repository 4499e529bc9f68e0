#include "feature_gates.h"

#include "cann_version.h"
#include "config.h"
#include "errors.h"

namespace npu_sim {
namespace {

struct FeatureGate {
  Feature feature;
  const char* description;
  const char* since; // first CANN version with the feature
};

// Indexed by Feature (same order as the enum: both come from the table).
constexpr FeatureGate kGates[] = {
#define NPU_SIM_CANN_FEATURE(enumerator, name, description, since) \
  {Feature::enumerator, description, since},
#include "cann_feature_table.inc"
#undef NPU_SIM_CANN_FEATURE
};

const FeatureGate& gateOf(Feature feature) {
  return kGates[static_cast<size_t>(feature)];
}

} // namespace

bool hasFeature(Feature feature) {
  // Parsing a short constant costs less than the calls it gates.
  return config().cann_version >= *CannVersion::parse(gateOf(feature).since);
}

aclError requireFeature(Feature feature, const char* api) {
  if (hasFeature(feature)) {
    return ACL_SUCCESS;
  }
  const FeatureGate& gate = gateOf(feature);
  return fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
              "%s: %s is not supported by the emulated CANN %s; it needs CANN %s "
              "or newer (set NPU_SIM_CANN_VERSION to emulate another release)",
              api, gate.description, config().cann_version.text.c_str(), gate.since);
}

} // namespace npu_sim
