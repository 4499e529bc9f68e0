// DDP's runtime statistics on npu: the c10d::Timer that DDP's logger asks
// TimerRegistry for by device type (avg_forward_compute_time,
// avg_backward_compute_time, avg_backward_comm_time, ... of
// DistributedDataParallel._get_ddp_logging_data()). Without one, DDP warns
// "Time stats are currently only collected for CPU and CUDA devices" and
// collects none.
//
// As CUDA's: each event is a timing event recorded on the current stream
// of the module's device, so the times are the device's; the forward's
// start is also kept on the host (the base Timer records it there too).
#include <array>
#include <optional>

#include <c10/core/Device.h>
#include <c10/util/Registry.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include "npu/NPUEvent.h"
#include "npu/NPUGuardImpl.h"
#include "npu/NPUStream.h"

namespace c10d_npu {
namespace {

class NPUTimer : public c10d::Timer {
 public:
  explicit NPUTimer(c10::Device device) : device_(device) {}

  void record(Event event) override {
    // The host time as well: DDP's logger reads some of them (the base class's
    // record).
    Timer::record(event);
    const c10_npu::NPUGuard guard(device_);
    c10_npu::NPUEvent& slot = event_of(event);
    slot = c10_npu::NPUEvent(ACL_EVENT_TIME_LINE);
    slot.record(c10_npu::getCurrentNPUStream(device_.index()));
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    const c10_npu::NPUGuard guard(device_);
    const c10_npu::NPUEvent& first = event_of(start);
    const c10_npu::NPUEvent& last = event_of(end);
    // One of them not recorded in this iteration (e.g. no communication
    // when no parameter needed a gradient): nothing to report.
    if (!first.was_recorded() || !last.was_recorded()) {
      return std::nullopt;
    }
    last.synchronize();
    first.synchronize();
    const float milliseconds = first.elapsed_time(last);
    // Events on two streams may be recorded out of order (the backward's
    // communication ends on the communicator's stream): report nothing
    // rather than a negative time.
    if (milliseconds < 0) {
      return std::nullopt;
    }
    return static_cast<int64_t>(static_cast<double>(milliseconds) * 1e6);
  }

 private:
  c10_npu::NPUEvent& event_of(Event event) { return events_[static_cast<size_t>(event)]; }

  c10::Device device_;
  std::array<c10_npu::NPUEvent, 5> events_; // one per c10d::Timer::Event
};

} // namespace
} // namespace c10d_npu

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, c10d_npu::NPUTimer);
} // namespace c10d
