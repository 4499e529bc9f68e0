// Reading another process's memory in one kernel copy (cross-memory
// attach, process_vm_readv): how the simulated HCCL's direct collectives
// read their peers' device buffers (Note [Direct collectives],
// collective_comm.cpp).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace npu_sim {

enum class PeerReadResult {
  kDone,
  kRefused, // the kernel does not let this process read the peer (EPERM, ENOSYS)
  kGone,    // the peer exited (ESRCH, or its memory is being torn down)
  kFault,   // [remote, remote + bytes) is not mapped in the peer
};

// Copies `bytes` at `remote` in process `pid` to `local`. Retries partial
// copies; on failure `why` holds the system's message.
PeerReadResult readPeerMemory(pid_t pid, uintptr_t remote, void* local, size_t bytes,
                              std::string* why);

} // namespace npu_sim
