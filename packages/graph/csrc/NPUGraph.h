// NPUGraph: npu work captured once from a stream and replayed with one call
// (torch.npu.NPUGraph, torch.accelerator.Graph on npu), CUDAGraph's
// counterpart on CANN's model capture (Note [Stream capture], core's
// NPUGraphsUtils.h).
//
// A capture
// - records the work launched on the current stream, and on the streams
//   that join it, into a model instead of running it;
// - takes the memory it allocates from a private pool (Note [Private pools],
//   core's NPUCachingAllocator.h), which the graph holds until reset(), so
//   that the addresses the captured work uses stay valid for its replays;
// - registers the device's default generator, and any other registered
//   generator, so that random ops draw new numbers at each replay (Note
//   [Random numbers in captured graphs], core's NPUGenerator.h).
// A replay enqueues the model on the current stream: no dispatcher, no
// allocator, no Python per op.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/GraphImplInterface.h>
#include <c10/core/Allocator.h>

#include "npu/NPUGenerator.h"
#include "npu/NPUGraphsUtils.h"
#include "npu/NPUStream.h"

namespace torch_npu_graph {

class NPUGraph final : public at::GraphImplInterface {
 public:
  explicit NPUGraph(const at::GraphImplArgs& args = {});
  ~NPUGraph() override;
  NPUGraph(const NPUGraph&) = delete;
  NPUGraph& operator=(const NPUGraph&) = delete;

  // Makes torch.accelerator.Graph create NPUGraphs for the npu device.
  static void register_with_accelerator();

  // Random ops captured with `generator` (an npu generator other than the
  // device's default, which every capture registers) draw new numbers at
  // each replay. Before capture_begin.
  void register_generator_state(const at::Generator& generator);

  // GraphImplInterface. Default capture mode: global, as torch_npu's.
  void capture_begin(
      c10::MempoolId_t pool = {0, 0}, at::GraphCaptureMode capture_mode = at::GraphCaptureMode::Default) override;
  void capture_end() override;
  // The model replays as captured: nothing to instantiate.
  void instantiate() override;
  void replay() override;
  void reset() override;
  c10::MempoolId_t pool() const override;
  // The model can always be described (debug_dump); nothing to enable.
  void enable_debug_mode() override;
  void debug_dump(const std::string& path) override;

  void capture_begin(c10::MempoolId_t pool, c10_npu::CaptureMode mode);

 private:
  struct RegisteredGenerator {
    c10::intrusive_ptr<c10_npu::NPUGeneratorImpl> generator;
    std::mutex* mutex; // the at::Generator's
    uint64_t wholegraph_increment = 0;
  };

  void add_generator(const at::Generator& generator);
  // Undoes what capture_begin set up, after a failed or invalidated capture.
  void abandon_capture();

  aclmdlRI model_ = nullptr;
  // The model being captured into: read by the pool filter, on any thread.
  std::atomic<aclmdlRI> model_id_{nullptr};
  bool capturing_ = false;
  c10::DeviceIndex device_ = -1;
  c10::MempoolId_t mempool_id_{0, 0};
  bool holds_pool_ = false;
  aclrtStream capture_stream_ = nullptr;
  c10::StreamId capture_stream_id_ = 0;
  std::vector<at::Generator> generator_handles_; // keep the registered generators alive
  std::vector<RegisteredGenerator> generators_;
};

} // namespace torch_npu_graph
