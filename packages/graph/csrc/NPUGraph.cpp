#include "NPUGraph.h"

#include <algorithm>
#include <mutex>

#include <c10/core/DeviceType.h>
#include <c10/util/Exception.h>

#include "npu/NPUCachingAllocator.h"
#include "npu/NPUFunctions.h"

namespace torch_npu_graph {
namespace {

c10_npu::CaptureMode to_capture_mode(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::Default:
    case at::GraphCaptureMode::Global:
      return c10_npu::CaptureMode::Global;
    case at::GraphCaptureMode::ThreadLocal:
      return c10_npu::CaptureMode::ThreadLocal;
    case at::GraphCaptureMode::Relaxed:
      return c10_npu::CaptureMode::Relaxed;
  }
  TORCH_CHECK(false, "unknown graph capture mode ", static_cast<int>(mode));
}

c10::intrusive_ptr<c10_npu::NPUGeneratorImpl> npu_generator_impl(const at::Generator& generator) {
  TORCH_CHECK(generator.defined(), "register_generator_state: the generator is undefined");
  TORCH_CHECK(
      generator.device().type() == c10::DeviceType::PrivateUse1,
      "register_generator_state: expected an npu generator, got one of device ", generator.device());
  return c10::intrusive_ptr<c10_npu::NPUGeneratorImpl>::reclaim_copy(
      generator.get<c10_npu::NPUGeneratorImpl>());
}

} // namespace

NPUGraph::NPUGraph(const at::GraphImplArgs& /*args*/) {
  // CANN's model needs no separate instantiation, so keep_graph changes
  // nothing: the model is kept until reset().
}

NPUGraph::~NPUGraph() {
  try {
    reset();
  } catch (const std::exception& e) {
    TORCH_WARN("NPUGraph: releasing the graph failed: ", e.what());
  }
}

void NPUGraph::register_with_accelerator() {
  // The registry's key is the device type's name as torch spells it for
  // PrivateUse1 once it is renamed ("NPU"); torch_npu renames it before
  // its plugins load.
  static const bool registered = [] {
    const std::string key = c10::DeviceTypeName(c10::DeviceType::PrivateUse1, /*lower_case=*/false);
    at::GraphImplRegistry()->Register(
        key, [](at::GraphImplArgs args) -> std::unique_ptr<at::GraphImplInterface> {
          return std::make_unique<NPUGraph>(args);
        });
    return true;
  }();
  (void)registered;
}

void NPUGraph::add_generator(const at::Generator& generator) {
  auto impl = npu_generator_impl(generator);
  const bool known = std::any_of(generators_.begin(), generators_.end(), [&](const RegisteredGenerator& g) {
    return g.generator->state().get() == impl->state().get();
  });
  if (!known) {
    generators_.push_back({impl, &impl->mutex_, 0});
    generator_handles_.push_back(generator);
  }
}

void NPUGraph::register_generator_state(const at::Generator& generator) {
  TORCH_CHECK(
      !capturing_ && model_ == nullptr,
      "register_generator_state: register generators before capture_begin (this graph ",
      capturing_ ? "is capturing" : "already holds a capture", ").");
  add_generator(generator);
}

void NPUGraph::capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode capture_mode) {
  capture_begin(pool, to_capture_mode(capture_mode));
}

void NPUGraph::capture_begin(c10::MempoolId_t pool, c10_npu::CaptureMode mode) {
  TORCH_CHECK(
      model_ == nullptr && !capturing_,
      "This NPUGraph instance already ", capturing_ ? "is capturing" : "owns a captured graph",
      ". To capture a new graph, create a new instance or call reset() first.");
  const c10_npu::NPUStream stream = c10_npu::getCurrentNPUStream();
  TORCH_CHECK(
      stream != c10_npu::getDefaultNPUStream(stream.device_index()),
      "NPU graphs must be captured on a non-default stream (for example inside "
      "`with torch.npu.stream(torch.npu.Stream()):`, which torch.npu.graph does for you); the "
      "captured graph may be replayed on any stream, the default one included.");
  device_ = stream.device_index();
  capture_stream_ = stream.stream();
  capture_stream_id_ = stream.id();

  // The default generator of the device takes part in every capture.
  add_generator(c10_npu::getDefaultNPUGenerator(device_));
  size_t prologues = 0;
  try {
    for (auto& g : generators_) {
      std::lock_guard<std::mutex> lock(*g.mutex);
      g.generator->capture_prologue();
      ++prologues;
    }
  } catch (...) {
    for (size_t i = 0; i < prologues; ++i) {
      std::lock_guard<std::mutex> lock(*generators_[i].mutex);
      generators_[i].generator->capture_epilogue();
    }
    throw;
  }

  // A pool of its own, or one shared with other graphs (`pool` from
  // graph_pool_handle() or another graph's pool()).
  mempool_id_ = (pool.first != 0 || pool.second != 0) ? pool : c10_npu::NPUCachingAllocator::graph_pool_handle();
  try {
    // Allocations on streams that capture into this graph (the capturing
    // stream and those that joined it) come from the pool.
    c10_npu::NPUCachingAllocator::beginAllocateToPool(
        device_, mempool_id_, [this](aclrtStream s) {
          return s == capture_stream_ || (model_id_.load() != nullptr && c10_npu::stream_capture_model(s) == model_id_.load());
        });
  } catch (...) {
    for (auto& g : generators_) {
      std::lock_guard<std::mutex> lock(*g.mutex);
      g.generator->capture_epilogue();
    }
    throw;
  }
  holds_pool_ = true;
  try {
    c10_npu::capture_begin(stream, mode);
  } catch (...) {
    abandon_capture();
    throw;
  }
  model_id_ = c10_npu::stream_capture_model(capture_stream_);
  capturing_ = true;
}

void NPUGraph::abandon_capture() {
  capturing_ = false;
  model_id_ = nullptr;
  c10_npu::NPUCachingAllocator::endAllocateToPool(device_, mempool_id_);
  for (auto& g : generators_) {
    std::lock_guard<std::mutex> lock(*g.mutex);
    g.generator->capture_epilogue();
  }
  if (holds_pool_) {
    holds_pool_ = false;
    c10_npu::NPUCachingAllocator::releasePool(device_, mempool_id_);
  }
}

void NPUGraph::capture_end() {
  TORCH_CHECK(capturing_, "NPUGraph::capture_end called without a capture_begin.");
  const c10_npu::NPUStream stream = c10_npu::getCurrentNPUStream(device_);
  TORCH_CHECK(
      stream.stream() == capture_stream_,
      "NPUGraph::capture_end must be called on the stream the capture began on (stream id ",
      capture_stream_id_, "); the current stream is ", stream.id(), ".");
  aclmdlRI model = nullptr;
  try {
    model = c10_npu::capture_end(stream);
  } catch (...) {
    abandon_capture();
    throw;
  }
  capturing_ = false;
  model_id_ = nullptr;
  c10_npu::NPUCachingAllocator::endAllocateToPool(device_, mempool_id_);
  for (auto& g : generators_) {
    std::lock_guard<std::mutex> lock(*g.mutex);
    g.wholegraph_increment = g.generator->capture_epilogue();
  }
  model_ = model;
}

void NPUGraph::instantiate() {
  TORCH_CHECK(model_ != nullptr, "NPUGraph::instantiate called without a preceding successful capture.");
}

void NPUGraph::replay() {
  TORCH_CHECK(
      model_ != nullptr,
      "NPUGraph::replay called without a preceding successful capture (capture_begin ... capture_end).");
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
  const c10_npu::NPUStream stream = c10_npu::getCurrentNPUStream(device_);
  for (auto& g : generators_) {
    std::lock_guard<std::mutex> lock(*g.mutex);
    g.generator->replay_prologue(g.wholegraph_increment, stream);
  }
  c10_npu::model_execute(model_, stream);
}

void NPUGraph::reset() {
  TORCH_CHECK(!capturing_, "NPUGraph::reset called during a capture; end the capture first.");
  if (model_ != nullptr) {
    aclmdlRI model = model_;
    model_ = nullptr;
    c10_npu::model_destroy(model); // waits for the replays queued
  }
  if (holds_pool_) {
    holds_pool_ = false;
    c10_npu::NPUCachingAllocator::releasePool(device_, mempool_id_);
  }
  generators_.clear();
  generator_handles_.clear();
}

c10::MempoolId_t NPUGraph::pool() const {
  TORCH_CHECK(
      model_ != nullptr || capturing_,
      "NPUGraph::pool called without a preceding successful capture.");
  return mempool_id_;
}

void NPUGraph::enable_debug_mode() {}

void NPUGraph::debug_dump(const std::string& path) {
  TORCH_CHECK(model_ != nullptr, "NPUGraph::debug_dump called without a preceding successful capture.");
  c10_npu::model_debug_dump(model_, path);
}

} // namespace torch_npu_graph
