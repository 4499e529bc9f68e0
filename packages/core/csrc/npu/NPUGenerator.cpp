#include "npu/NPUGenerator.h"

#include <array>
#include <cstring>
#include <mutex>

#include <ATen/EmptyTensor.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include "npu/NPUFunctions.h"
#include "npu/NPUStream.h"
#include "npu/NPUWork.h"

namespace c10_npu {
namespace {

c10::DeviceIndex resolve(c10::DeviceIndex device_index) {
  if (device_index < 0) {
    device_index = current_device();
  }
  check_device_index(device_index);
  return device_index;
}

} // namespace

NPUGeneratorImpl::NPUGeneratorImpl(c10::DeviceIndex device_index)
    : NPUGeneratorImpl(device_index, c10::make_intrusive<NPUGeneratorState>(c10::default_rng_seed_val)) {}

NPUGeneratorImpl::NPUGeneratorImpl(c10::DeviceIndex device_index, c10::intrusive_ptr<NPUGeneratorState> state)
    : c10::GeneratorImpl(
          c10::Device(c10::DeviceType::PrivateUse1, device_index),
          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      state_(std::move(state)) {}

c10::DeviceType NPUGeneratorImpl::device_type() {
  return c10::DeviceType::PrivateUse1;
}

void NPUGeneratorImpl::set_current_seed(uint64_t seed) {
  TORCH_CHECK(
      state_->capturing == 0,
      "Cannot reseed an npu generator while a graph captures with it: seed before capture_begin.");
  state_->seed = seed;
  state_->philox_offset = 0;
}

uint64_t NPUGeneratorImpl::current_seed() const {
  return state_->seed;
}

uint64_t NPUGeneratorImpl::seed() {
  const uint64_t random = c10::detail::getNonDeterministicRandom(true);
  set_current_seed(random);
  return random;
}

void NPUGeneratorImpl::set_offset(uint64_t offset) {
  TORCH_CHECK(
      state_->capturing == 0,
      "Cannot set the offset of an npu generator while a graph captures with it.");
  state_->philox_offset = offset;
}

uint64_t NPUGeneratorImpl::get_offset() const {
  return state_->philox_offset;
}

c10::intrusive_ptr<c10::TensorImpl> NPUGeneratorImpl::get_state() const {
  auto state = at::detail::empty_cpu({static_cast<int64_t>(kStateSize)}, c10::ScalarType::Byte);
  auto* bytes = state.data_ptr<uint8_t>();
  const int64_t offset = static_cast<int64_t>(state_->philox_offset);
  std::memcpy(bytes, &state_->seed, sizeof(state_->seed));
  std::memcpy(bytes + sizeof(state_->seed), &offset, sizeof(offset));
  return state.getIntrusivePtr();
}

void NPUGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  at::detail::check_rng_state(new_state);
  TORCH_CHECK(
      new_state.numel() == static_cast<int64_t>(kStateSize),
      "Invalid NPU generator state: expected a ByteTensor of ", kStateSize,
      " bytes ([seed: uint64][offset: int64]), got ", new_state.numel(), " bytes.");
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  uint64_t seed = 0;
  int64_t offset = 0;
  std::memcpy(&seed, bytes, sizeof(seed));
  std::memcpy(&offset, bytes + sizeof(seed), sizeof(offset));
  TORCH_CHECK(offset >= 0, "Invalid NPU generator state: negative offset ", offset);
  set_current_seed(seed);
  state_->philox_offset = static_cast<uint64_t>(offset);
}

namespace {

uint64_t philox_increment(uint64_t increment) {
  return ((increment + 3) / 4) * 4;
}

} // namespace

std::pair<uint64_t, uint64_t> NPUGeneratorImpl::philox_engine_inputs(uint64_t increment) {
  TORCH_CHECK(
      state_->capturing == 0,
      "An npu generator that a graph captures with was used on a stream that does not capture; "
      "use it only inside the capture until capture_end.");
  const uint64_t offset = state_->philox_offset;
  state_->philox_offset += philox_increment(increment);
  return {state_->seed, offset};
}

PhiloxInputs NPUGeneratorImpl::philox_inputs(uint64_t increment, bool capturing) {
  if (!capturing) {
    auto [seed, offset] = philox_engine_inputs(increment);
    return {seed, offset, nullptr};
  }
  TORCH_CHECK(
      state_->capturing != 0,
      "A random op was captured with an npu generator the graph does not know: register it "
      "first with graph.register_generator_state(generator) (the device's default generator "
      "is registered by capture_begin).");
  const uint64_t offset = state_->offset_intragraph;
  state_->offset_intragraph += philox_increment(increment);
  return {0, offset, state_->replay_base};
}

void NPUGeneratorImpl::capture_prologue() {
  TORCH_CHECK(
      state_->capturing == 0,
      "An npu generator can serve one graph capture at a time; this one is already captured "
      "with (end the other capture first).");
  state_->capturing = 1;
  state_->offset_intragraph = 0;
}

uint64_t NPUGeneratorImpl::capture_epilogue() {
  TORCH_CHECK(state_->capturing != 0, "capture_epilogue without capture_prologue");
  state_->capturing = 0;
  return state_->offset_intragraph;
}

void NPUGeneratorImpl::replay_prologue(uint64_t wholegraph_increment, const NPUStream& stream) {
  TORCH_CHECK(
      state_->capturing == 0,
      "Cannot replay a graph while another graph captures with the same npu generator.");
  const uint64_t seed = state_->seed;
  const uint64_t base = state_->philox_offset;
  state_->philox_offset += wholegraph_increment;
  if (wholegraph_increment == 0) {
    return; // the graph draws nothing from this generator
  }
  launch_host_work(stream, "npu_graph_random_base", [replay_base = state_->replay_base, seed, base] {
    replay_base->seed.store(seed, std::memory_order_relaxed);
    replay_base->offset.store(base, std::memory_order_relaxed);
  });
}

c10::intrusive_ptr<c10::GeneratorImpl> NPUGeneratorImpl::graphsafe_get_state() const {
  return c10::intrusive_ptr<NPUGeneratorImpl>::reclaim(new NPUGeneratorImpl(device().index(), state_));
}

void NPUGeneratorImpl::graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& state) {
  auto* other = dynamic_cast<NPUGeneratorImpl*>(state.get());
  TORCH_CHECK(other != nullptr, "graphsafe_set_state: expected the state of an npu generator");
  state_ = other->state_;
}

c10::intrusive_ptr<NPUGeneratorImpl> NPUGeneratorImpl::clone() const {
  return c10::intrusive_ptr<NPUGeneratorImpl>::reclaim(clone_impl());
}

NPUGeneratorImpl* NPUGeneratorImpl::clone_impl() const {
  auto state = c10::make_intrusive<NPUGeneratorState>(state_->seed);
  state->philox_offset = state_->philox_offset;
  return new NPUGeneratorImpl(device().index(), std::move(state));
}

const at::Generator& getDefaultNPUGenerator(c10::DeviceIndex device_index) {
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<at::Generator, kMaxDevices> generators;
  device_index = resolve(device_index);
  std::call_once(once[device_index], [&] {
    generators[device_index] = at::make_generator<NPUGeneratorImpl>(device_index);
  });
  return generators[device_index];
}

at::Generator createNPUGenerator(c10::DeviceIndex device_index) {
  return at::make_generator<NPUGeneratorImpl>(resolve(device_index));
}

} // namespace c10_npu
