#include "ipc_event.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "errors.h"
#include "ipc_memory.h"
#include "runtime.h"
#include "util.h"

namespace npu_sim {

struct IpcEventState::Page {
  uint64_t magic;
  uint64_t nonce;
  std::atomic<uint64_t> latest;
  std::atomic<uint64_t> first_pending;
  std::atomic<uint32_t> changes; // futex word
  std::atomic<uint32_t> sleepers;
};

namespace {

constexpr uint64_t kMagic = 0x31545645504953ULL; // "SIPEVT1"
constexpr char kPrefix[] = "npusim-ipcevt-";
constexpr size_t kPageBytes = 4096;
static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free);

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the word is shared with other processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

aclError badHandle(const char* text) {
  return fail(ACL_ERROR_INVALID_PARAM,
              "aclrtIpcOpenEventHandle: '%.64s' is not a handle of aclrtIpcGetEventHandle", text);
}

} // namespace

aclError IpcEventState::create(IpcEventState** out, std::string* handle) {
  const int fd = memfd_create("npu_sim:ipc-event", MFD_CLOEXEC);
  void* p = MAP_FAILED;
  if (fd >= 0 && ftruncate(fd, kPageBytes) == 0) {
    p = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (p == MAP_FAILED) {
    const int err = errno;
    if (fd >= 0) {
      close(fd);
    }
    return fail(ACL_ERROR_RT_RESOURCE_ALLOC_FAIL,
                "aclrtIpcGetEventHandle: could not create the shared event state: %s",
                std::strerror(err));
  }
  auto* page = new (p) Page{};
  page->magic = kMagic;
  page->nonce = ipc::newNonce();
  *handle = strFormat("%s%d-%d-%016" PRIx64, kPrefix, static_cast<int>(getpid()), fd, page->nonce);
  *out = new IpcEventState(page, fd);
  return ACL_SUCCESS;
}

aclError IpcEventState::open(const char* text, IpcEventState** out) {
  int pid = 0;
  int fd = 0;
  uint64_t nonce = 0;
  int consumed = 0;
  if (std::strncmp(text, kPrefix, sizeof(kPrefix) - 1) != 0 ||
      std::sscanf(text + sizeof(kPrefix) - 1, "%d-%d-%16" SCNx64 "%n", &pid, &fd, &nonce,
                  &consumed) != 3 ||
      text[sizeof(kPrefix) - 1 + consumed] != '\0') {
    return badHandle(text);
  }
  const std::string path = strFormat("/proc/%d/fd/%d", pid, fd);
  const int local = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (local < 0) {
    const int err = errno;
    struct stat st {};
    const std::string proc = strFormat("/proc/%d", pid);
    if (stat(proc.c_str(), &st) != 0) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtIpcOpenEventHandle: handle '%s': the exporting process %d has exited",
                  text, pid);
    }
    if (st.st_uid != geteuid()) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtIpcOpenEventHandle: handle '%s' belongs to process %d of user %u; "
                  "events are shared only between processes of the same user",
                  text, pid, static_cast<unsigned>(st.st_uid));
    }
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtIpcOpenEventHandle: handle '%s' is unknown to process %d (%s: its event "
                "was destroyed)",
                text, pid, std::strerror(err));
  }
  struct stat st {};
  void* p = MAP_FAILED;
  if (fstat(local, &st) == 0 && st.st_size == static_cast<off_t>(kPageBytes)) {
    p = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, local, 0);
  }
  if (p == MAP_FAILED) {
    close(local);
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtIpcOpenEventHandle: handle '%s' is unknown to process %d", text, pid);
  }
  auto* page = static_cast<Page*>(p);
  if (page->magic != kMagic || page->nonce != nonce) {
    munmap(p, kPageBytes);
    close(local);
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtIpcOpenEventHandle: handle '%s' is unknown to process %d (its event was "
                "destroyed)",
                text, pid);
  }
  *out = new IpcEventState(page, local);
  return ACL_SUCCESS;
}

IpcEventState::~IpcEventState() {
  munmap(page_, kPageBytes);
  close(fd_);
}

void IpcEventState::publish(uint64_t latest, uint64_t first_pending) {
  page_->latest.store(latest, std::memory_order_release);
  page_->first_pending.store(first_pending, std::memory_order_release);
  page_->changes.fetch_add(1, std::memory_order_release);
  if (page_->sleepers.load(std::memory_order_seq_cst) != 0) {
    futex(&page_->changes, FUTEX_WAKE, INT32_MAX, nullptr);
  }
}

uint64_t IpcEventState::latest() const {
  return page_->latest.load(std::memory_order_acquire);
}

bool IpcEventState::isComplete(uint64_t generation) const {
  return generation == 0 || page_->first_pending.load(std::memory_order_acquire) > generation;
}

bool IpcEventState::wait(uint64_t generation) const {
  if (spinUntil([&] { return isComplete(generation); }, kWaiterSpin)) {
    return true;
  }
  // Sleep on the change counter; a publication between reading it and
  // sleeping changes it, so the futex returns at once. The timeout only
  // serves to notice process exit.
  const timespec timeout{0, 100'000'000};
  page_->sleepers.fetch_add(1, std::memory_order_seq_cst);
  bool done = true;
  while (true) {
    const uint32_t seen = page_->changes.load(std::memory_order_acquire);
    if (isComplete(generation)) {
      break;
    }
    if (processExiting()) {
      done = false;
      break;
    }
    futex(&page_->changes, FUTEX_WAIT, seen, &timeout);
  }
  page_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  return done;
}

} // namespace npu_sim
