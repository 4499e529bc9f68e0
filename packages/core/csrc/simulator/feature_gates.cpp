#include "feature_gates.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_set>

#include "cann_version.h"
#include "config.h"
#include "errors.h"

namespace npu_sim {
namespace {

struct FeatureGate {
  Feature feature;
  const char* name;
  const char* description;
  const char* since; // first CANN version with the feature
};

// Indexed by Feature (same order as the enum: both come from the table).
constexpr FeatureGate kGates[] = {
#define NPU_SIM_CANN_FEATURE(enumerator, name, description, since) \
  {Feature::enumerator, name, description, since},
#include "cann_feature_table.inc"
#undef NPU_SIM_CANN_FEATURE
};

const FeatureGate& gateOf(Feature feature) {
  return kGates[static_cast<size_t>(feature)];
}

// Note [Which tests reach CANN's features] (compat/cann_reach.py): with
// NPU_SIM_CANN_REACH_LOG set (./dev test sets it for the default row), every
// process appends "<NPU_SIM_CANN_REACH_TAG>\t<feature>\n" to that file the
// first time the current tag (the pytest node running) asks for a feature.
// Only a test that asks can behave differently at another emulated release, so
// the rows that differ only in CANN run the tests the log names. The file is
// opened per line with O_APPEND: lines of concurrent processes stay whole.
void noteReach(const FeatureGate& gate) {
  static const char* const log = std::getenv("NPU_SIM_CANN_REACH_LOG");
  if (log == nullptr || *log == '\0') {
    return;
  }
  const char* tag = std::getenv("NPU_SIM_CANN_REACH_TAG");
  std::string line = std::string(tag ? tag : "") + "\t" + gate.name + "\n";
  static std::mutex mutex;
  static std::unordered_set<std::string> written;
  std::lock_guard<std::mutex> lock(mutex);
  if (!written.insert(line).second) {
    return;
  }
  int fd = ::open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) {
    // A failed write loses a line of a test aid, never the program's work.
    (void)!::write(fd, line.data(), line.size());
    ::close(fd);
  }
}

bool hasFeatureUnlogged(Feature feature) {
  // Parsing a short constant costs less than the calls it gates.
  return config().cann_version >= *CannVersion::parse(gateOf(feature).since);
}

aclError refusal(Feature feature, const char* api) {
  const FeatureGate& gate = gateOf(feature);
  return fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
              "%s: %s is not supported by the emulated CANN %s; it needs CANN %s "
              "or newer (set NPU_SIM_CANN_VERSION to emulate another release)",
              api, gate.description, config().cann_version.text.c_str(), gate.since);
}

} // namespace

void noteFeatureQuestion(Feature feature) {
  noteReach(gateOf(feature));
}

bool hasFeature(Feature feature) {
  noteFeatureQuestion(feature);
  return hasFeatureUnlogged(feature);
}

aclError requireFeature(Feature feature, const char* api) {
  return hasFeature(feature) ? ACL_SUCCESS : refusal(feature, api);
}

aclError requireFeatureUnlogged(Feature feature, const char* api) {
  return hasFeatureUnlogged(feature) ? ACL_SUCCESS : refusal(feature, api);
}

} // namespace npu_sim
