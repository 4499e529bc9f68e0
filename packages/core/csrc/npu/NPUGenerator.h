// The npu random number generator: a counter-based (Philox-style) generator
// whose whole state is a 64-bit seed and a 64-bit offset, like CUDA's. Its
// serialized state is 16 bytes, [seed: uint64][offset: int64], the layout
// DTensor's RNG tracker reads and writes.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include "npu/Macros.h"

namespace c10_npu {

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
  // one Philox round yields four 32-bit values.
  std::pair<uint64_t, uint64_t> philox_engine_inputs(uint64_t increment);

  static c10::DeviceType device_type();

 private:
  NPUGeneratorImpl* clone_impl() const override;

  uint64_t seed_;
  uint64_t philox_offset_ = 0;
};

// The default generator of `device_index` (-1: current device).
TORCH_NPU_API const at::Generator& getDefaultNPUGenerator(c10::DeviceIndex device_index = -1);
TORCH_NPU_API at::Generator createNPUGenerator(c10::DeviceIndex device_index = -1);

} // namespace c10_npu
