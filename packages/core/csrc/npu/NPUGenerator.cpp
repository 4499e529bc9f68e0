#include "npu/NPUGenerator.h"

#include <array>
#include <cstring>
#include <mutex>

#include <ATen/EmptyTensor.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include "npu/NPUFunctions.h"

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
    : c10::GeneratorImpl(
          c10::Device(c10::DeviceType::PrivateUse1, device_index),
          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(c10::default_rng_seed_val) {}

c10::DeviceType NPUGeneratorImpl::device_type() {
  return c10::DeviceType::PrivateUse1;
}

void NPUGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  philox_offset_ = 0;
}

uint64_t NPUGeneratorImpl::current_seed() const {
  return seed_;
}

uint64_t NPUGeneratorImpl::seed() {
  const uint64_t random = c10::detail::getNonDeterministicRandom(true);
  set_current_seed(random);
  return random;
}

void NPUGeneratorImpl::set_offset(uint64_t offset) {
  philox_offset_ = offset;
}

uint64_t NPUGeneratorImpl::get_offset() const {
  return philox_offset_;
}

c10::intrusive_ptr<c10::TensorImpl> NPUGeneratorImpl::get_state() const {
  auto state = at::detail::empty_cpu({static_cast<int64_t>(kStateSize)}, c10::ScalarType::Byte);
  auto* bytes = state.data_ptr<uint8_t>();
  const int64_t offset = static_cast<int64_t>(philox_offset_);
  std::memcpy(bytes, &seed_, sizeof(seed_));
  std::memcpy(bytes + sizeof(seed_), &offset, sizeof(offset));
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
  seed_ = seed;
  philox_offset_ = static_cast<uint64_t>(offset);
}

std::pair<uint64_t, uint64_t> NPUGeneratorImpl::philox_engine_inputs(uint64_t increment) {
  increment = ((increment + 3) / 4) * 4;
  const uint64_t offset = philox_offset_;
  philox_offset_ += increment;
  return {seed_, offset};
}

c10::intrusive_ptr<NPUGeneratorImpl> NPUGeneratorImpl::clone() const {
  return c10::intrusive_ptr<NPUGeneratorImpl>::reclaim(clone_impl());
}

NPUGeneratorImpl* NPUGeneratorImpl::clone_impl() const {
  auto* copy = new NPUGeneratorImpl(device().index());
  copy->seed_ = seed_;
  copy->philox_offset_ = philox_offset_;
  return copy;
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
