#include "npu/WorkAccesses.h"

#include <c10/core/TensorImpl.h>

#include "npu/NPUException.h"
#include "npu/NPUFunctions.h"
#include "npu/impl/AclInterface.h"

namespace c10_npu {

namespace detail {
std::atomic<bool> g_race_check{false};
} // namespace detail

namespace {

thread_local WorkAccessScope* tls_scope = nullptr;

// A strided view is declared as its dense runs up to this many (exact);
// beyond, as the span from its lowest to its highest element (a range that
// includes the gaps: a neighbouring view's work can look like a race).
constexpr int64_t kMaxRunsPerTensor = 64;

std::atomic<LaunchSiteProvider> g_site_provider{nullptr};

// The simulator's site provider: ops' LaunchSite of the launching line,
// held until the thread's next launch (the simulator copies the text).
const char* launch_site_for_simulator() {
  thread_local LaunchSite last;
  const LaunchSiteProvider provider = g_site_provider.load(std::memory_order_acquire);
  last = provider != nullptr ? provider() : nullptr;
  return last != nullptr ? last->c_str() : nullptr;
}

} // namespace

namespace detail {

void adopt_runtime_race_check(const acl::AclApi& api) {
  int enabled = 0;
  if (api.npuSimRaceCheckEnabled == nullptr || api.npuSimRaceCheckEnabled(&enabled) != ACL_SUCCESS ||
      enabled == 0) {
    return;
  }
  api.npuSimRaceCheckSetSiteProvider(&launch_site_for_simulator);
  g_race_check.store(true, std::memory_order_relaxed);
}

} // namespace detail

void set_race_check_enabled(bool enabled) {
  const auto& api = acl::api();
  TORCH_CHECK(
      api.npuSimRaceCheckEnable != nullptr,
      "The stream race detector is part of the NPU simulator; the CANN runtime in use has none.");
  if (enabled) {
    NPU_CHECK(api.npuSimRaceCheckSetSiteProvider(&launch_site_for_simulator));
  }
  NPU_CHECK(api.npuSimRaceCheckEnable(enabled ? 1 : 0));
  detail::g_race_check.store(enabled, std::memory_order_relaxed);
}

void synchronize_unordered(const NPUStream& stream) {
  const auto& api = acl::api();
  if (!race_check_enabled() || api.npuSimSynchronizeStreamUnordered == nullptr) {
    stream.synchronize();
    return;
  }
  ensure_device_context(stream.device_index());
  NPU_CHECK(api.npuSimSynchronizeStreamUnordered(stream.stream()));
}

void set_launch_site_provider(LaunchSiteProvider provider) {
  g_site_provider.store(provider, std::memory_order_release);
}

void WorkAccessScope::add(const at::TensorBase& tensor, bool write) {
  if (!active_ || !tensor.defined() || tensor.device().type() != c10::DeviceType::PrivateUse1) {
    return;
  }
  const c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
  if (impl->numel() == 0 || !impl->has_storage() || impl->storage().data() == nullptr) {
    return;
  }
  const auto sizes = impl->sizes();
  const auto strides = impl->strides();
  const int64_t item = static_cast<int64_t>(impl->itemsize());
  const auto* start = static_cast<const char*>(impl->storage().data()) + impl->storage_offset() * item;
  // Dense runs: the innermost dimensions that are laid out contiguously
  // (size-1 dimensions skipped) form one run of `run` elements.
  int64_t run = 1;
  size_t outer = sizes.size(); // dimensions [0, outer) step between runs
  while (outer > 0 && (sizes[outer - 1] == 1 || strides[outer - 1] == run)) {
    run *= sizes[outer - 1];
    --outer;
  }
  const int64_t runs = impl->numel() / run;
  if (runs > 1 && runs <= kMaxRunsPerTensor) {
    // A strided view's exact bytes: views that interleave (a[:, 0] and
    // a[:, 1]) do not overlap, and their gaps are no access.
    std::vector<int64_t> index(outer, 0);
    for (int64_t r = 0; r < runs; ++r) {
      int64_t offset = 0;
      for (size_t d = 0; d < outer; ++d) {
        offset += index[d] * strides[d];
      }
      accesses_.push_back(WorkAccess{start + offset * item, static_cast<size_t>(run * item), write});
      for (size_t d = outer; d-- > 0;) {
        if (++index[d] < sizes[d]) {
          break;
        }
        index[d] = 0;
      }
    }
    return;
  }
  // One run, or too many to list: the bytes between the lowest and highest
  // element.
  int64_t low = 0;
  int64_t high = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t span = (sizes[d] - 1) * strides[d];
    (span < 0 ? low : high) += span;
  }
  accesses_.push_back(WorkAccess{start + low * item, static_cast<size_t>((high - low + 1) * item), write});
}

const std::vector<WorkAccess>* WorkAccessScope::current() {
  return tls_scope != nullptr ? &tls_scope->accesses_ : nullptr;
}

void WorkAccessScope::enter() {
  outer_ = tls_scope;
  tls_scope = this;
}

void WorkAccessScope::leave() {
  tls_scope = outer_;
}

} // namespace c10_npu
