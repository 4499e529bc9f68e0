// Reaching another process's memory, the two ways the simulated HCCL's
// direct collectives read their peers' device buffers (Note [Direct
// collectives], collective_comm.cpp): a mapping of the peer's device
// memfd, read with plain loads, or one kernel copy per read (cross-memory
// attach, process_vm_readv) where there is no such mapping.
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

// A mapping, in this process, of a memfd another process holds:
// its whole size, MAP_SHARED, so this process sees the owner's writes and
// the owner's punched holes (freed memory) alike. The mapping keeps the
// memory alive after the owner exits, until it is unmapped.
class PeerMapping {
 public:
  PeerMapping() = default;
  ~PeerMapping();
  PeerMapping(PeerMapping&& other) noexcept;
  PeerMapping& operator=(PeerMapping&& other) noexcept;
  PeerMapping(const PeerMapping&) = delete;
  PeerMapping& operator=(const PeerMapping&) = delete;

  // Maps descriptor `fd` of process `pid`, after checking that it is the
  // file `inode` names (st_ino) and is `bytes` long, so that a reused
  // descriptor number is never mistaken for it. Taking another process's
  // descriptor needs the same permission as reading its memory (ptrace
  // access); false with the reason in `why` when anything is refused.
  bool open(pid_t pid, int fd, uint64_t inode, uint64_t bytes, std::string* why);

  const char* data() const {
    return data_;
  }
  // Writable: a direct all-reduce writes its share of the result into the
  // peers' outputs (Note [All-reduce writes every rank's share],
  // collective_comm.cpp).
  char* data() {
    return data_;
  }
  uint64_t size() const {
    return size_;
  }

 private:
  void reset();

  char* data_ = nullptr;
  uint64_t size_ = 0;
};

} // namespace npu_sim
