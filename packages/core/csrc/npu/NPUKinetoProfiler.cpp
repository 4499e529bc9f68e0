// The npu device's Kineto plugin: torch.profiler.profile(activities=[...,
// ProfilerActivity.PrivateUse1]) shows the NPU's kernels, copies, memsets
// and mstx ranges, with device-side times, each linked to the host op that
// launched it, as Kineto shows CUDA kernels from CUPTI.
//
// Note [NPU activity in torch.profiler]
// torch (2.13 and later) lets a PrivateUse1 backend register a Kineto child
// profiler (torch/csrc/profiler/standalone/privateuse1_profiler.h). Kineto
// configures it for every trace; a session is live only when the trace asks
// for device activity (ProfilerActivity.PrivateUse1 brings
// CONCURRENT_KERNEL), so CPU-only traces cost nothing here. A live session:
// - start(): turns the runtime's activity recording on (Note [Device
//   activity records], NPUActivity.h) and samples the offset from the
//   records' steady clock to torch's Unix-epoch clock. If recording is
//   already on (torch_npu.profiler collecting), the session stays empty and
//   says so in errors(): one collector owns the records at a time; unless
//   that collector asked for Kineto's correlation ids (Note [Kineto
//   correlation for torch_npu.profiler], NPUActivity.h): then the session
//   only forwards them.
// - pushCorrelationId/popCorrelationId: Kineto calls them around every host
//   op on the op's thread; they go to the runtime's correlation stack, so
//   each work item carries the id of the innermost op that launched it.
//   No RecordFunction callback of our own is needed.
// - stop(): flushes the records, keeping those of work that started after
//   start(), and turns recording off. torch's profiler
//   synchronises the device first (it sets use_device for PrivateUse1), so
//   the work launched inside the trace has run and recorded; a device-work
//   error is raised to the program by that synchronisation, as without a
//   profiler.
// - processTrace(): one GenericTraceActivity per record: kernels as
//   CONCURRENT_KERNEL, copies and memsets as GPU_MEMCPY / GPU_MEMSET, mstx
//   ranges on a stream as GPU_USER_ANNOTATION (device = the NPU index,
//   resource = the stream's number in this trace, 0 = default stream), host
//   mstx ranges as PRIVATEUSE1_RUNTIME events on the calling thread (torch
//   warns about USER_ANNOTATIONs it did not make itself); each linked
//   (activity.linked, "External id" in the trace) to the host op whose
//   correlation id it carries. torch maps these types to
//   DeviceType.PrivateUse1, which makes prof.events() / key_averages()
//   carry device times and kernels. No flow arrows: Kineto draws CUDA's
//   from the launch call (cudaLaunchKernel) to the kernel, and the records
//   have no launch event to start one from.
// Built only against a torch whose headers have the registry and Kineto
// (CMakeLists.txt); elsewhere torch.profiler shows host ops only.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <c10/util/ApproximateClock.h>
#include <c10/util/Exception.h>

#include "npu/NPUActivity.h"
#include "npu/NPUFunctions.h"
#include "npu/NPUStream.h"

namespace c10_npu {
namespace {

using libkineto::ActivityType;

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What this plugin adds to a trace: device activity.
const std::set<ActivityType>& device_activity_types() {
  static const std::set<ActivityType> types{
      ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY, ActivityType::GPU_MEMSET,
      ActivityType::GPU_USER_ANNOTATION};
  return types;
}

ActivityType trace_type(const activity::Record& r) {
  switch (r.kind) {
    case activity::Kind::Kernel: return ActivityType::CONCURRENT_KERNEL;
    case activity::Kind::Memcpy: return ActivityType::GPU_MEMCPY;
    case activity::Kind::Memset: return ActivityType::GPU_MEMSET;
    case activity::Kind::Mstx:
      return r.stream != nullptr ? ActivityType::GPU_USER_ANNOTATION : ActivityType::PRIVATEUSE1_RUNTIME;
  }
  return ActivityType::CONCURRENT_KERNEL;
}

class NPUActivityProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit NPUActivityProfilerSession(bool live) : live_(live) {}

  // A trace abandoned before stop() (torch's profiler raised on its way
  // out) gives recording back, so that the next trace can own it.
  ~NPUActivityProfilerSession() override {
    if (recording_.load(std::memory_order_acquire)) {
      try {
        activity::enable(false);
        activity::flush();
      } catch (...) {
      }
    }
  }

  void start() override {
    if (!live_) {
      return;
    }
    if (!activity::is_available()) {
      errors_.emplace_back("the loaded NPU runtime records no device activity; the trace has host ops only");
      return;
    }
    if (activity::is_enabled() && activity::forwarding_kineto_correlation()) {
      forwarding_.store(true, std::memory_order_release);
      status_ = libkineto::TraceStatus::RECORDING;
      return;
    }
    if (activity::is_enabled()) {
      errors_.emplace_back(
          "device activity is already being collected (torch_npu.profiler?); this trace has no NPU "
          "activity: run one profiler at a time");
      TORCH_WARN(errors_.back());
      return;
    }
    activity::flush(); // leftovers of an earlier collector
    // Kineto may start a session again for the next cycle of a schedule:
    // nothing of the previous cycle carries over.
    records_.clear();
    buffer_ = libkineto::CpuTraceBuffer{};
    stream_numbers_.clear();
    streams_seen_.clear();
    started_ns_ = steady_now_ns();
    clock_offset_ns_ = c10::getTime() - started_ns_;
    activity::enable(true);
    recording_.store(true, std::memory_order_release);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (forwarding_.exchange(false, std::memory_order_acq_rel)) {
      status_ = libkineto::TraceStatus::PROCESSING;
      return;
    }
    if (!recording_.exchange(false, std::memory_order_acq_rel)) {
      return;
    }
    // No synchronisation here: torch's profiler has synchronised the device
    // (use_device) before stopping Kineto, and raised any device-work error
    // to the program there; a second one here would swallow errors.
    records_ = activity::flush();
    activity::enable(false);
    // Work that was already running when the trace started (launched in a
    // warm-up step, say) is not the trace's.
    std::erase_if(records_, [this](const activity::Record& r) { return r.start_ns < started_ns_; });
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override {
    return errors_;
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(
      libkineto::ActivityLogger& logger,
      libkineto::getLinkedActivityCallback linked_activity,
      int64_t start_time,
      int64_t end_time) override {
    const int64_t first = records_.empty() ? start_time : records_.front().start_ns + clock_offset_ns_;
    buffer_.span = libkineto::TraceSpan(std::min(first, start_time), end_time, "NPU");
    const int64_t pid = static_cast<int64_t>(::getpid());
    for (const activity::Record& r : records_) {
      const ActivityType type = trace_type(r);
      buffer_.emplace_activity(buffer_.span, type, r.name);
      libkineto::GenericTraceActivity& a = libkineto::CpuTraceBuffer::toRef(buffer_.activities.back());
      a.startTime = r.start_ns + clock_offset_ns_;
      a.endTime = r.end_ns + clock_offset_ns_;
      if (type == ActivityType::PRIVATEUSE1_RUNTIME) {
        a.device = static_cast<int32_t>(pid);
        a.resource = static_cast<int32_t>(r.thread_id);
        a.threadId = static_cast<int32_t>(r.thread_id);
      } else {
        a.device = static_cast<int32_t>(r.device);
        a.resource = stream_number(r.device, r.stream);
        a.addMetadata("device", static_cast<int>(r.device));
        a.addMetadata("stream", a.resource);
      }
      if (r.kind == activity::Kind::Memcpy || r.kind == activity::Kind::Memset) {
        a.addMetadata("bytes", r.bytes);
      }
      if (r.kind == activity::Kind::Mstx) {
        a.addMetadataQuoted("domain", r.domain);
      }
      if (r.correlation_id != 0) {
        a.id = static_cast<int32_t>(r.correlation_id);
        a.addMetadata("correlation", r.correlation_id);
        a.linked = linked_activity(static_cast<int32_t>(r.correlation_id));
      }
      logger.handleGenericActivity(a);
    }
    records_.clear();
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return nullptr;
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> infos;
    for (const auto& [key, number] : stream_numbers_) {
      infos.push_back(libkineto::ResourceInfo{
          number, number, key.first,
          number == 0 ? std::string("stream 0 (default)") : "stream " + std::to_string(number)});
    }
    return infos;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::make_unique<libkineto::CpuTraceBuffer>(std::move(buffer_));
  }

  void pushCorrelationId(uint64_t id) override {
    if (recording_.load(std::memory_order_acquire) || forwarding_.load(std::memory_order_acquire)) {
      activity::push_correlation_id(id);
    }
  }

  void popCorrelationId() override {
    if (recording_.load(std::memory_order_acquire) || forwarding_.load(std::memory_order_acquire)) {
      try {
        activity::pop_correlation_id();
      } catch (const c10::Error&) {
        // The op began before this session started: nothing was pushed.
      }
    }
  }

 private:
  // The stream's number in this trace: 0 for the device's default stream,
  // then 1, 2, ... in order of first appearance.
  int32_t stream_number(c10::DeviceIndex device, aclrtStream stream) {
    const auto key = std::make_pair(static_cast<int64_t>(device), reinterpret_cast<uintptr_t>(stream));
    if (auto it = stream_numbers_.find(key); it != stream_numbers_.end()) {
      return it->second;
    }
    int32_t number = 0;
    if (stream != getDefaultNPUStream(device).stream()) {
      number = ++streams_seen_[device];
    }
    stream_numbers_.emplace(key, number);
    return number;
  }

  const bool live_;
  std::atomic<bool> recording_{false};
  // Pushing Kineto's correlation ids for torch_npu.profiler, which owns the
  // records.
  std::atomic<bool> forwarding_{false};
  int64_t started_ns_ = 0; // steady clock
  int64_t clock_offset_ns_ = 0;
  std::vector<activity::Record> records_;
  std::vector<std::string> errors_;
  libkineto::CpuTraceBuffer buffer_;
  std::map<std::pair<int64_t, uintptr_t>, int32_t> stream_numbers_;
  std::map<int64_t, int32_t> streams_seen_;
};

class NPUActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override {
    static const std::string name = "npu";
    return name;
  }

  const std::set<ActivityType>& availableActivities() const override {
    return device_activity_types();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& activity_types,
      const libkineto::Config& /*config*/) override {
    bool wants_device = false;
    for (ActivityType type : activity_types) {
      wants_device = wants_device || device_activity_types().count(type) != 0;
    }
    return std::make_unique<NPUActivityProfilerSession>(wants_device);
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/,
      int64_t /*duration_ms*/,
      const std::set<ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }
};

struct RegisterNPUActivityProfiler {
  RegisterNPUActivityProfiler() {
    activity::note_kineto_plugin_registered();
    torch::profiler::impl::PrivateUse1ProfilerRegistry::instance().registerFactory(
        []() -> std::unique_ptr<libkineto::IActivityProfiler> { return std::make_unique<NPUActivityProfiler>(); });
  }
} g_register_npu_activity_profiler;

} // namespace
} // namespace c10_npu
