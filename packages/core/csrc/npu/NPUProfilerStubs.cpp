// The npu device's methods for PyTorch's profilers (torch.profiler with
// ProfilerActivity.PrivateUse1, torch.autograd.profiler.profile(use_device=
// "npu")): timing events on the current stream, device iteration and
// synchronisation, registered as PrivateUse1's profiler stubs when core
// loads. Without them the profilers report npu ranges with garbage times.
// Device-side kernel records for traces come from the activity API
// (NPUActivity.h): torch.profiler gets them through the Kineto plugin
// (NPUKinetoProfiler.cpp), torch_npu.profiler reads them directly.
#include <torch/csrc/profiler/stubs/base.h>

#include <c10/util/ApproximateClock.h>

#include "npu/NPUEvent.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUMstx.h"
#include "npu/NPUStream.h"

namespace c10_npu {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

class NPUProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = current_device();
    if (device != nullptr) {
      *device = index;
    }
    auto npu_event = std::make_shared<NPUEvent>(ACL_EVENT_TIME_LINE);
    if (cpu_ns != nullptr) {
      *cpu_ns = c10::getTime();
    }
    npu_event->record(getCurrentNPUStream(index));
    *event = std::static_pointer_cast<void>(npu_event);
  }

  // Microseconds between the two records, as PyTorch's CUDA stubs give.
  float elapsed(const ProfilerVoidEventStub* start, const ProfilerVoidEventStub* end) const override {
    const auto* begin_event = static_cast<const NPUEvent*>(start->get());
    const auto* end_event = static_cast<const NPUEvent*>(end->get());
    begin_event->synchronize();
    end_event->synchronize();
    return begin_event->elapsed_time(*end_event) * 1000.0f;
  }

  // Annotations: host-side mstx records in the default domain (Note [mstx
  // records], NPUMstx.h).
  void mark(const char* name) const override {
    mstx::mark(name, std::nullopt, mstx::kDefaultDomain);
  }
  void rangePush(const char* name) const override {
    mstx::range_push(name, std::nullopt, mstx::kDefaultDomain);
  }
  void rangePop() const override {
    mstx::range_pop(mstx::kDefaultDomain);
  }

  bool enabled() const override {
    return true;
  }

  void onEachDevice(std::function<void(int)> op) const override {
    const c10::DeviceIndex count = device_count();
    for (c10::DeviceIndex i = 0; i < count; ++i) {
      c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, i));
      op(i);
    }
  }

  void synchronize() const override {
    device_synchronize();
  }
};

struct RegisterNPUProfilerStubs {
  RegisterNPUProfilerStubs() {
    static NPUProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} g_register_npu_profiler_stubs;

} // namespace
} // namespace c10_npu
