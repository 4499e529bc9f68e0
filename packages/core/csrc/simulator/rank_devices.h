// Which device each rank of a communicator runs on (Note [One device per
// rank of a machine], rank_devices.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hccl_types.h"

namespace npu_sim {

// The physical device of a rank whose device is not compared: a rank table
// placed it.
constexpr int32_t kUnplacedDevice = -1;

// HCCL_E_PARA, with `why` naming the first two ranks that run on one
// physical device of one machine; HCCL_SUCCESS when every rank of a machine
// has its own. `machines[r]` and `physical_devices[r]` describe rank r
// (kUnplacedDevice: not compared).
HcclResult refuseSharedDevices(const std::vector<std::string>& machines,
                               const std::vector<int32_t>& physical_devices, std::string* why);

} // namespace npu_sim
