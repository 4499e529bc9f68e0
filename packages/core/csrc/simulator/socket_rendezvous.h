// How the ranks of a communicator spanning machines find each other (Note
// [Socket transport], socket_transport.cpp): the process that makes a root
// info runs a rendezvous server whose address the root info carries; every
// rank registers there and gets the table of all ranks back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hccl_types.h"
#include "socket_io.h"

namespace npu_sim {

// The address of this process's rendezvous server, started on first use;
// it serves every root info this process makes until the process exits.
HcclResult rendezvousServer(SocketAddress* out, std::string* why);

// Starts a rendezvous server of this process on `port` (a rank table's
// rank 0: its peers know the port, not a root info), unless one runs.
HcclResult rendezvousServerOn(uint16_t port, std::string* why);

// Whether a rank on a machine other than `machine` registered for the
// communicator `name` at this process's rendezvous server (false when this
// process runs none).
bool rendezvousHeardFromAnotherMachine(const std::string& name, const std::string& machine);

// A rank as the table has it: its machine identity, its device's physical
// id and where it listens.
struct RankEndpoint {
  std::string machine;
  int32_t physical_device = -1;
  SocketAddress listen;
};

// Registers rank `rank` of `size` of the communicator `name` (on `machine`,
// device `physical_device`, listening at `listen_port`) with the server at `root` and waits until
// `deadline` (`limit`: HCCL_CONNECT_TIMEOUT in seconds, for messages) for
// the table of every rank, indexed by rank. This rank's listen address is
// HCCL_IF_IP, else the local address its connection to the server used.
HcclResult registerRank(const std::string& name, const SocketAddress& root, uint32_t size,
                        uint32_t rank, const std::string& machine, int32_t physical_device,
                        uint16_t listen_port,
                        SocketClock::time_point deadline, const std::string& limit,
                        std::vector<RankEndpoint>* table, std::string* why);

} // namespace npu_sim
