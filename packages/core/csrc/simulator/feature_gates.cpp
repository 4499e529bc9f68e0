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

// One row per version-gated feature. Add rows here; nothing else changes.
constexpr FeatureGate kGates[] = {
    {Feature::kVirtualMemory,
     "virtual memory management (aclrtReserveMemAddress, aclrtMallocPhysical, "
     "aclrtMapMem and related functions)",
     "8.0.RC1"},
};

const FeatureGate& gateOf(Feature feature) {
  for (const FeatureGate& gate : kGates) {
    if (gate.feature == feature) {
      return gate;
    }
  }
  return kGates[0]; // unreachable: every Feature has a row
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
