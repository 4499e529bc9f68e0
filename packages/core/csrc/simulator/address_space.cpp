#include "address_space.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "util.h"

namespace npu_sim {
namespace {

// Window 0 starts on a 1 GiB boundary: addresses look tidy in messages and
// large alignment requests of aclrtReserveMemAddress are cheap to satisfy.
constexpr uint64_t kBaseAlignment = kGiB;

void* reserveNone(void* at, uint64_t size, bool fixed) {
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (fixed ? MAP_FIXED : 0);
  return mmap(at, size, PROT_NONE, flags, -1, 0);
}

} // namespace

bool reserveAddressSpace(uint32_t device_count, uint64_t capacity, bool checker,
                         AddressLayout* layout, std::string* error) {
  AddressLayout l;
  l.device_count = device_count;
  l.checker = checker;
  if (!roundUp(capacity, kVmmGranularity, &l.heap_size)) {
    *error = "device memory capacity is too large";
    return false;
  }
  l.vmm_size = 4 * l.heap_size;
  l.window_size = l.heap_size + l.vmm_size;
  l.total = l.window_size * device_count;
  if (device_count == 0) {
    *layout = l;
    return true;
  }
  const uint64_t span = l.total * (checker ? 2 : 1);
  if (l.total / device_count != l.window_size || span / (checker ? 2 : 1) != l.total ||
      span > (uint64_t{1} << 46)) {
    *error = strFormat("the configuration needs %s of virtual address space, more than a "
                       "process has",
                       formatBytes(span).c_str());
    return false;
  }
  void* raw = reserveNone(nullptr, span + kBaseAlignment, false);
  if (raw == MAP_FAILED) {
    *error = strFormat("could not reserve %s of virtual address space for %u devices of "
                       "%s (%s); lower NPU_SIM_DEVICE_MEMORY or NPU_SIM_DEVICE_COUNT",
                       formatBytes(span).c_str(), device_count,
                       formatBytes(capacity).c_str(), std::strerror(errno));
    return false;
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t base = (start + kBaseAlignment - 1) & ~(kBaseAlignment - 1);
  // Give back the unaligned head and the unused tail.
  if (base > start) {
    munmap(raw, base - start);
  }
  const uintptr_t end = base + span;
  const uintptr_t raw_end = start + span + kBaseAlignment;
  if (raw_end > end) {
    munmap(reinterpret_cast<void*>(end), raw_end - end);
  }
  l.device_base = base;
  l.access_delta = checker ? static_cast<intptr_t>(l.total) : 0;
  *layout = l;
  return true;
}

bool mapDeviceRange(const AddressLayout& layout, uintptr_t device_address, uint64_t size,
                    int fd, uint64_t fd_offset, std::string* error) {
  void* at = reinterpret_cast<void*>(layout.toHost(device_address));
  void* p = mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                 static_cast<off_t>(fd_offset));
  if (p == MAP_FAILED) {
    *error = strFormat("mmap of %s of device memory failed: %s", formatBytes(size).c_str(),
                       std::strerror(errno));
    return false;
  }
  // A fork()ed child must not share (and scribble on) the parent's device
  // memory: it cannot use the simulator anyway (see runtime.cpp).
  madvise(p, size, MADV_DONTFORK);
  return true;
}

bool unmapDeviceRange(const AddressLayout& layout, uintptr_t device_address, uint64_t size,
                      std::string* error) {
  void* at = reinterpret_cast<void*>(layout.toHost(device_address));
  if (reserveNone(at, size, true) == MAP_FAILED) {
    *error = strFormat("restoring PROT_NONE failed: %s", std::strerror(errno));
    return false;
  }
  return true;
}

} // namespace npu_sim
