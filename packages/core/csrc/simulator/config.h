// The simulator's configuration, read from the environment once, at the
// first use of any function:
//
//   NPU_SIM_DEVICE_COUNT      devices (0..64), default 8
//   NPU_SIM_DEVICE_MEMORY     capacity per device, e.g. 16GiB, 512M, 1073741824
//   NPU_SIM_CHECKER=1         host access to device memory faults (checker)
//   NPU_SIM_DEVICE_HEAP       shared | private: whether aclrtMalloc memory is
//                             the device's memfd, which peer ranks can map
//                             (Note [Device heap kind], config.cpp); default
//                             shared in a multi-process job, else private
//   NPU_SIM_RACE_CHECK=1      stream race detector (race_detector.h)
//   NPU_SIM_CANN_VERSION      emulated CANN release, default 9.0.0
//   NPU_SIM_SOC_NAME          base SoC name, default Ascend910B3
//   ATEN_CPU_CAPABILITY       default | avx2: host code uses no AVX-512
//                             (PyTorch's variable; bulk_copy.cpp)
//   NPU_SIM_STREAM_PAGES      1..8: pages a bulk copy streams at once
//                             (Note [Page streams follow the CPU]); default
//                             by the CPU
//   ASCEND_RT_VISIBLE_DEVICES physical ids made visible, as on real CANN
//
// An invalid value is reported on stderr (naming the variable and the
// accepted form) and replaced by the default; configuration never fails.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cann_version.h"

namespace npu_sim {

struct Config {
  uint32_t device_count = 0;           // visible (logical) devices
  uint32_t physical_device_count = 0;  // NPU_SIM_DEVICE_COUNT
  std::vector<int32_t> physical_ids;   // logical id -> physical id
  uint64_t capacity = 0;               // bytes per device, multiple of 4 KiB
  bool checker = false;
  // Note [Device heap kind]: aclrtMalloc memory is MAP_SHARED of the
  // device's memfd (peers can map it) rather than private huge pages.
  bool shared_heap = false;
  // NPU_SIM_DEVICE_HEAP named the kind (or the checker fixed it): a
  // communicator does not make a private heap shared then.
  bool heap_kind_fixed = false;
  bool race_check = false;
  // Host code may use AVX-512 where the CPU has it (ATEN_CPU_CAPABILITY
  // neither `default` nor `avx2`): Note [Bulk copies bypass the cache].
  bool wide_vectors = true;
  // Note [Page streams follow the CPU]: 0 leaves it to the CPU's vendor.
  uint32_t stream_pages = 0;
  CannVersion cann_version;
  std::string soc_name;                // ends with " (simulated)"
  std::string description;             // npuSimDescribe
};

const Config& config();

// "16GiB", "16G", "512 MiB", "1.5G", "4096" -> bytes (K = 1024).
std::optional<uint64_t> parseByteSize(std::string_view text);

} // namespace npu_sim
