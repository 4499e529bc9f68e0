#include "ipc_memory.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <map>
#include <mutex>

#include "errors.h"
#include "util.h"

namespace npu_sim::ipc {
namespace {

constexpr char kKeyPrefix[] = "npusim-ipc-";
constexpr char kMagic[8] = {'n', 'p', 'u', 's', 'i', 'p', 'c', '1'};

// The descriptor memfd: a header, the pieces, then the allowed pids.
struct DescriptorHeader {
  char magic[8];
  uint64_t nonce;
  uint64_t flags;      // ACL_RT_IPC_MEM_EXPORT_FLAG_*
  uint64_t lead;       // exported pointer - first piece's first page
  uint64_t size;       // exported bytes
  uint32_t piece_count;
  uint32_t pid_count;
};

struct DescriptorPiece {
  int32_t fd;
  uint32_t reserved;
  uint64_t offset;
  uint64_t size;
};

struct Export {
  int descriptor = -1;
  DescriptorHeader header{};
  std::vector<SharedPiece> pieces;
  std::vector<int32_t> pids;
};

struct Import {
  DeviceMemory* memory = nullptr;
  uintptr_t base = 0;
};

struct Registry {
  std::mutex mutex;
  std::map<std::string, Export> exports;
  std::map<std::string, Import> imports;
};

Registry& registry() {
  static auto* r = new Registry(); // leaked: imports may be closed from static destructors
  return *r;
}

struct ParsedKey {
  pid_t pid = 0;
  int descriptor = -1;
  uint64_t nonce = 0;
};

bool parseKey(const char* key, ParsedKey* out) {
  if (std::strncmp(key, kKeyPrefix, sizeof(kKeyPrefix) - 1) != 0) {
    return false;
  }
  int pid = 0;
  int fd = 0;
  uint64_t nonce = 0;
  int consumed = 0;
  if (std::sscanf(key + sizeof(kKeyPrefix) - 1, "%d-%d-%16" SCNx64 "%n", &pid, &fd, &nonce,
                  &consumed) != 3 ||
      key[sizeof(kKeyPrefix) - 1 + consumed] != '\0' || pid <= 0 || fd < 0) {
    return false;
  }
  *out = ParsedKey{pid, fd, nonce};
  return true;
}

bool writeAll(int fd, const void* data, size_t size, off_t at) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = pwrite(fd, p, size, at);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return false;
    }
    p += n;
    at += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool writeDescriptor(const Export& e) {
  std::vector<char> bytes(sizeof(DescriptorHeader) + e.pieces.size() * sizeof(DescriptorPiece) +
                          e.pids.size() * sizeof(int32_t));
  DescriptorHeader header = e.header;
  header.pid_count = static_cast<uint32_t>(e.pids.size());
  std::memcpy(bytes.data(), &header, sizeof(header));
  char* at = bytes.data() + sizeof(header);
  for (const SharedPiece& piece : e.pieces) {
    const DescriptorPiece d{piece.fd, 0, piece.offset, piece.size};
    std::memcpy(at, &d, sizeof(d));
    at += sizeof(d);
  }
  if (!e.pids.empty()) {
    std::memcpy(at, e.pids.data(), e.pids.size() * sizeof(int32_t));
  }
  // Grow only: an importer reading meanwhile sees the old pid list or the
  // new one, never a truncated header.
  return writeAll(e.descriptor, bytes.data(), bytes.size(), 0);
}

std::string procFd(pid_t pid, int fd) {
  return strFormat("/proc/%d/fd/%d", static_cast<int>(pid), fd);
}

// Why /proc/<pid>/fd/<fd> of an exporter could not be opened.
aclError cannotOpen(const char* key, const ParsedKey& parsed, int err, const char* what) {
  struct stat st {};
  const std::string proc = strFormat("/proc/%d", static_cast<int>(parsed.pid));
  if (stat(proc.c_str(), &st) != 0 || (kill(parsed.pid, 0) != 0 && errno == ESRCH)) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtIpcMemImportByKey: key '%s': the exporting process %d has exited", key,
                static_cast<int>(parsed.pid));
  }
  if (st.st_uid != geteuid()) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtIpcMemImportByKey: key '%s' belongs to process %d of user %u; device "
                "memory is shared only between processes of the same user (this is user %u)",
                key, static_cast<int>(parsed.pid), static_cast<unsigned>(st.st_uid),
                static_cast<unsigned>(geteuid()));
  }
  if (err == ENOENT) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtIpcMemImportByKey: key '%s' is unknown: process %d has no such export "
                "(closed with aclrtIpcMemClose, or its memory was freed)",
                key, static_cast<int>(parsed.pid));
  }
  return fail(ACL_ERROR_INVALID_PARAM,
              "aclrtIpcMemImportByKey: key '%s': cannot open the %s of process %d: %s", key,
              what, static_cast<int>(parsed.pid), std::strerror(err));
}

aclError unknownKey(const char* key, const ParsedKey& parsed) {
  return fail(ACL_ERROR_INVALID_PARAM,
              "aclrtIpcMemImportByKey: key '%s' is unknown: process %d has no such export "
              "(closed with aclrtIpcMemClose, or its memory was freed)",
              key, static_cast<int>(parsed.pid));
}

// What an importer read from an exporter's descriptor.
struct OpenedExport {
  DescriptorHeader header{};
  std::vector<DescriptorPiece> pieces;
  std::vector<int32_t> pids;
  dev_t device = 0;
  ino_t inode = 0;
};

aclError readDescriptor(const char* key, const ParsedKey& parsed, OpenedExport* out) {
  const std::string path = procFd(parsed.pid, parsed.descriptor);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return cannotOpen(key, parsed, errno, "export descriptor");
  }
  struct stat st {};
  std::vector<char> bytes;
  if (fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(DescriptorHeader))) {
    bytes.resize(static_cast<size_t>(st.st_size));
    const ssize_t n = pread(fd, bytes.data(), bytes.size(), 0);
    bytes.resize(n < 0 ? 0 : static_cast<size_t>(n));
  }
  close(fd);
  if (bytes.size() < sizeof(DescriptorHeader)) {
    return unknownKey(key, parsed);
  }
  std::memcpy(&out->header, bytes.data(), sizeof(DescriptorHeader));
  const DescriptorHeader& h = out->header;
  const size_t need = sizeof(DescriptorHeader) + h.piece_count * sizeof(DescriptorPiece) +
      h.pid_count * sizeof(int32_t);
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.nonce != parsed.nonce ||
      h.piece_count == 0 || bytes.size() < need) {
    return unknownKey(key, parsed);
  }
  out->pieces.resize(h.piece_count);
  std::memcpy(out->pieces.data(), bytes.data() + sizeof(DescriptorHeader),
              h.piece_count * sizeof(DescriptorPiece));
  out->pids.resize(h.pid_count);
  if (h.pid_count != 0) {
    std::memcpy(out->pids.data(),
                bytes.data() + sizeof(DescriptorHeader) + h.piece_count * sizeof(DescriptorPiece),
                h.pid_count * sizeof(int32_t));
  }
  out->device = st.st_dev;
  out->inode = st.st_ino;
  return ACL_SUCCESS;
}

// Whether the exporter still has the descriptor `opened` was read from.
bool stillExported(const ParsedKey& parsed, const OpenedExport& opened) {
  struct stat st {};
  return stat(procFd(parsed.pid, parsed.descriptor).c_str(), &st) == 0 &&
      st.st_dev == opened.device && st.st_ino == opened.inode;
}

void closeAll(const std::vector<SharedPiece>& pieces) {
  std::vector<int> closed;
  for (const SharedPiece& piece : pieces) {
    if (piece.fd >= 0 && std::find(closed.begin(), closed.end(), piece.fd) == closed.end()) {
      close(piece.fd);
      closed.push_back(piece.fd);
    }
  }
}

} // namespace

uint64_t newNonce() {
  uint64_t nonce = 0;
  for (int attempt = 0; attempt < 8 && nonce == 0; ++attempt) {
    if (getrandom(&nonce, sizeof(nonce), 0) != static_cast<ssize_t>(sizeof(nonce))) {
      nonce = 0;
    }
  }
  if (nonce == 0) {
    // No entropy source: something no other export of this machine has at
    // the same pid and descriptor.
    nonce = ((static_cast<uint64_t>(getpid()) << 32) ^ static_cast<uint64_t>(nowNs())) | 1;
  }
  return nonce;
}

aclError exportMemory(const std::vector<SharedPiece>& pieces, uint64_t lead, uint64_t size,
                      uint64_t flags, std::string* key) {
  Export e;
  e.pieces = pieces;
  std::memcpy(e.header.magic, kMagic, sizeof(kMagic));
  e.header.nonce = newNonce();
  e.header.flags = flags;
  e.header.lead = lead;
  e.header.size = size;
  e.header.piece_count = static_cast<uint32_t>(pieces.size());
  e.descriptor = memfd_create("npu_sim:ipc-export", MFD_CLOEXEC);
  if (e.descriptor < 0 || !writeDescriptor(e)) {
    const int err = errno;
    if (e.descriptor >= 0) {
      close(e.descriptor);
    }
    return fail(ACL_ERROR_RT_RESOURCE_ALLOC_FAIL,
                "aclrtIpcMemGetExportKey: could not create the export descriptor: %s",
                std::strerror(err));
  }
  *key = strFormat("%s%d-%d-%016" PRIx64, kKeyPrefix, static_cast<int>(getpid()), e.descriptor,
                   e.header.nonce);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.exports.emplace(*key, std::move(e));
  return ACL_SUCCESS;
}

aclError importMemory(DeviceMemory& memory, const char* key, void** devPtr) {
  ParsedKey parsed;
  if (!parseKey(key, &parsed)) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtIpcMemImportByKey: '%.80s' is not a key made by aclrtIpcMemGetExportKey",
                key);
  }
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    if (auto it = r.imports.find(key); it != r.imports.end()) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtIpcMemImportByKey: key '%s' is already imported by this process (at "
                  "0x%lx); use that pointer, or aclrtIpcMemClose it first",
                  key, static_cast<unsigned long>(it->second.base));
    }
  }
  OpenedExport opened;
  if (aclError err = readDescriptor(key, parsed, &opened); err != ACL_SUCCESS) {
    return err;
  }
  if ((opened.header.flags & ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION) == 0) {
    const int32_t self = static_cast<int32_t>(getpid());
    if (std::find(opened.pids.begin(), opened.pids.end(), self) == opened.pids.end()) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtIpcMemImportByKey: process %d may not import key '%s': the exporter "
                  "(process %d) allowed %s; it must call aclrtIpcMemSetImportPid with this "
                  "pid, or export with ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION",
                  static_cast<int>(self), key, static_cast<int>(parsed.pid),
                  opened.pids.empty() ? "no process yet"
                                      : strFormat("%zu other process(es)", opened.pids.size())
                                            .c_str());
    }
  }
  // Open each device memfd of the exporter once.
  std::vector<SharedPiece> pieces;
  std::map<int32_t, int> opened_fds;
  for (const DescriptorPiece& d : opened.pieces) {
    auto it = opened_fds.find(d.fd);
    if (it == opened_fds.end()) {
      const int fd = open(procFd(parsed.pid, d.fd).c_str(), O_RDWR | O_CLOEXEC);
      if (fd < 0) {
        const int err = errno;
        for (const auto& entry : opened_fds) {
          close(entry.second);
        }
        return cannotOpen(key, parsed, err, "device memory");
      }
      it = opened_fds.emplace(d.fd, fd).first;
    }
    pieces.push_back(SharedPiece{it->second, d.offset, d.size});
  }
  uintptr_t base = 0;
  aclError err = memory.mapShared(pieces, &base);
  closeAll(pieces); // the mappings keep the memory
  if (err != ACL_SUCCESS) {
    return err;
  }
  if (!stillExported(parsed, opened)) {
    memory.unmapShared(base);
    return unknownKey(key, parsed);
  }
  {
    std::lock_guard lock(r.mutex);
    if (!r.imports.emplace(key, Import{&memory, base}).second) {
      // Another thread imported the same key meanwhile.
      memory.unmapShared(base);
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtIpcMemImportByKey: key '%s' is already imported by this process", key);
    }
  }
  *devPtr = reinterpret_cast<void*>(base + opened.header.lead);
  return ACL_SUCCESS;
}

aclError setImportPids(const char* key, const int32_t* pids, size_t count) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.exports.find(key);
  if (it == r.exports.end()) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtIpcMemSetImportPid: '%.80s' is not a key this process exported "
                "(aclrtIpcMemGetExportKey), or it was closed",
                key);
  }
  Export& e = it->second;
  for (size_t i = 0; i < count; ++i) {
    if (pids[i] <= 0) {
      return fail(ACL_ERROR_INVALID_PARAM, "aclrtIpcMemSetImportPid: pid[%zu] = %d is not a pid",
                  i, static_cast<int>(pids[i]));
    }
  }
  for (size_t i = 0; i < count; ++i) {
    if (std::find(e.pids.begin(), e.pids.end(), pids[i]) == e.pids.end()) {
      e.pids.push_back(pids[i]);
    }
  }
  if (!writeDescriptor(e)) {
    return fail(ACL_ERROR_RT_INTERNAL_ERROR,
                "aclrtIpcMemSetImportPid: could not update the export descriptor: %s",
                std::strerror(errno));
  }
  return ACL_SUCCESS;
}

aclError closeKey(const char* key) {
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  if (auto it = r.imports.find(key); it != r.imports.end()) {
    const Import import = it->second;
    r.imports.erase(it);
    lock.unlock();
    return import.memory->unmapShared(import.base);
  }
  if (auto it = r.exports.find(key); it != r.exports.end()) {
    ::close(it->second.descriptor);
    r.exports.erase(it);
    return ACL_SUCCESS;
  }
  return fail(ACL_ERROR_INVALID_PARAM,
              "aclrtIpcMemClose: '%.80s' is not a key this process exported or imported (or "
              "it was closed already)",
              key);
}

void revokeExports(int fd, uint64_t offset, uint64_t size) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (auto it = r.exports.begin(); it != r.exports.end();) {
    const bool overlaps =
        std::any_of(it->second.pieces.begin(), it->second.pieces.end(), [&](const SharedPiece& p) {
          return p.fd == fd && p.offset < offset + size && offset < p.offset + p.size;
        });
    if (overlaps) {
      ::close(it->second.descriptor);
      it = r.exports.erase(it);
    } else {
      ++it;
    }
  }
}

} // namespace npu_sim::ipc
