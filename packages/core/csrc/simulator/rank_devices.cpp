#include "rank_devices.h"

namespace npu_sim {

// Note [One device per rank of a machine]
// Two ranks of one communicator on one device of one machine are refused
// when they meet, as NCCL refuses them ("Duplicate GPU detected") and real
// HCCL, whose ranks each own their device, cannot run them. The simulator
// could run them (a device is only memory and threads), so without this
// check a job whose processes forget torch.npu.set_device(local_rank) would
// run here, every rank on npu:0, and fail on the first real machine.
// Physical ids are compared, so ASCEND_RT_VISIBLE_DEVICES that gives each
// process another device as its npu:0 is fine. Every rank checks the same
// table once all have met (the shared segment's rank states, or the
// rendezvous server's table when the job meets over TCP), so all of them
// fail with the same message and none waits for the others. A rank table's
// communicator is not compared: the table places each rank on a device of
// its server (a device listed twice is refused when it is read), and its
// servers may be addresses of one machine.
HcclResult refuseSharedDevices(const std::vector<std::string>& machines,
                               const std::vector<int32_t>& physical_devices, std::string* why) {
  for (size_t a = 0; a < physical_devices.size(); ++a) {
    for (size_t b = a + 1; b < physical_devices.size(); ++b) {
      if (physical_devices[a] != kUnplacedDevice && physical_devices[a] == physical_devices[b] &&
          machines[a] == machines[b]) {
        *why = "ranks " + std::to_string(a) + " and " + std::to_string(b) +
            " of the communicator both use the device with physical id " +
            std::to_string(physical_devices[a]) + " of machine " + machines[a] +
            ": each rank of a machine needs a device of its own (as with HCCL on real NPUs, and "
            "NCCL refuses a duplicate GPU). Set each process's device before it joins: "
            "torch.npu.set_device(local_rank), init_process_group(..., device_id="
            "torch.device('npu', local_rank)) or aclrtSetDevice";
        return HCCL_E_PARA;
      }
    }
  }
  return HCCL_SUCCESS;
}

} // namespace npu_sim
