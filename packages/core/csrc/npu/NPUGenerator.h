// The npu random number generator: a counter-based (Philox-style) generator
// whose whole state is a 64-bit seed and a 64-bit offset, like CUDA's. Its
// serialized state is 16 bytes, [seed: uint64][offset: int64], the layout
// DTensor's RNG tracker reads and writes.
//
// Note [Random numbers in captured graphs]
// A random op launched while its stream captures (Note [Stream capture],
// NPUGraphsUtils.h) must draw new numbers at each replay, as CUDA graphs
// do. So while a graph captures, the generator hands out offsets *within
// the graph* (capture_prologue .. capture_epilogue sums them to the graph's
// whole increment), and the captured work reads seed and base offset when
// it runs, from the state's ReplayBase. Each replay first reserves the
// whole increment from the generator (replay_prologue) and writes the seed
// and that base into the ReplayBase with a work item on the replay stream,
// so the captured work, which runs after it in stream order, draws exactly
// the numbers the same ops would draw eagerly from that generator state.
// The ReplayBase is the generator state's, shared by every graph that
// captured with it, as CUDA's seed/offset tensors are: replays of such
// graphs on different streams at the same time must be ordered by the
// caller.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/util/intrusive_ptr.h>

#include "npu/Macros.h"

namespace c10_npu {

class NPUStream;

// A generator's seed and Philox offset, and its capture state. Shared by
// generators made with graphsafe_get_state, so that a graph registered with
// one sees the offsets the others reserve (what torch.utils.checkpoint
// relies on inside a graph).
struct TORCH_NPU_API NPUGeneratorState : public c10::intrusive_ptr_target {
  // Written by a replay's prologue, read by captured random work.
  struct ReplayBase {
    std::atomic<uint64_t> seed{0};
    std::atomic<uint64_t> offset{0};
  };

  explicit NPUGeneratorState(uint64_t seed_in) : seed(seed_in) {}

  uint64_t seed;
  uint64_t philox_offset = 0;
  // Graph capture (Note [Random numbers in captured graphs]).
  int capturing = 0; // captures underway that registered this state
  uint64_t offset_intragraph = 0;
  std::shared_ptr<ReplayBase> replay_base = std::make_shared<ReplayBase>();
};

// The (seed, offset) a random kernel uses. For a kernel captured into a
// graph, `replay_base` is set: seed and base offset are read from it when
// the kernel runs, and `offset` is the kernel's offset within the graph.
struct PhiloxInputs {
  uint64_t seed = 0;
  uint64_t offset = 0;
  std::shared_ptr<const NPUGeneratorState::ReplayBase> replay_base;
};

class TORCH_NPU_API NPUGeneratorImpl : public c10::GeneratorImpl {
 public:
  static constexpr size_t kStateSize = 16;

  explicit NPUGeneratorImpl(c10::DeviceIndex device_index = -1);
  ~NPUGeneratorImpl() override = default;

  c10::intrusive_ptr<NPUGeneratorImpl> clone() const;

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // Reserves `increment` counter values for a kernel launch and returns the
  // (seed, offset) it must use. Offsets advance in multiples of 4 because
  // one Philox round yields four 32-bit values. Outside a capture only.
  std::pair<uint64_t, uint64_t> philox_engine_inputs(uint64_t increment);
  // As philox_engine_inputs, for a kernel launched on a stream that
  // captures (`capturing`) or not: a captured kernel gets an offset within
  // the graph (Note [Random numbers in captured graphs]).
  PhiloxInputs philox_inputs(uint64_t increment, bool capturing);

  // Graph capture and replay (Note [Random numbers in captured graphs]):
  // capture_prologue when a graph that registered this generator starts
  // capturing, capture_epilogue at its end (the graph's whole increment),
  // replay_prologue before each replay on `stream`.
  void capture_prologue();
  uint64_t capture_epilogue();
  void replay_prologue(uint64_t wholegraph_increment, const NPUStream& stream);

  // A generator sharing this one's state, and adopting another's.
  c10::intrusive_ptr<c10::GeneratorImpl> graphsafe_get_state() const override;
  void graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& state) override;
  // What graphs register: compared by identity.
  const c10::intrusive_ptr<NPUGeneratorState>& state() const {
    return state_;
  }

  static c10::DeviceType device_type();

 private:
  NPUGeneratorImpl(c10::DeviceIndex device_index, c10::intrusive_ptr<NPUGeneratorState> state);
  NPUGeneratorImpl* clone_impl() const override;

  c10::intrusive_ptr<NPUGeneratorState> state_;
};

// The default generator of `device_index` (-1: current device).
TORCH_NPU_API const at::Generator& getDefaultNPUGenerator(c10::DeviceIndex device_index = -1);
TORCH_NPU_API at::Generator createNPUGenerator(c10::DeviceIndex device_index = -1);

} // namespace c10_npu
