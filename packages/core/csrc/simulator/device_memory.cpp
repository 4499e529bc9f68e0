#include "device_memory.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "errors.h"
#include "ipc_memory.h"
#include "race_detector.h"
#include "util.h"

namespace npu_sim {
namespace {

uintptr_t addr(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

} // namespace

DeviceMemory::DeviceMemory(uint32_t device, const AddressLayout& layout, uint64_t capacity,
                           bool shared_heap)
    : device_(device),
      layout_(layout),
      capacity_(capacity),
      shared_heap_(shared_heap),
      heap_base_(layout.heapBase(device)),
      vmm_base_(layout.vmmBase(device)),
      physical_(capacity),
      virtual_(layout.vmm_size, layout.vmmBase(device)) {}

aclError DeviceMemory::initialize() {
  const std::string name = "npu_sim:device" + std::to_string(device_);
  fd_ = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd_ < 0) {
    return fail(ACL_ERROR_RT_RESOURCE_ALLOC_FAIL,
                "aclrtSetDevice: could not create the memory of device %u: memfd_create: %s",
                device_, std::strerror(errno));
  }
  if (ftruncate(fd_, static_cast<off_t>(capacity_)) != 0) {
    const int err = errno;
    close(fd_);
    fd_ = -1;
    return fail(ACL_ERROR_RT_RESOURCE_ALLOC_FAIL,
                "aclrtSetDevice: could not size the memory of device %u to %s: %s", device_,
                formatBytes(capacity_).c_str(), std::strerror(err));
  }
  // Note [Device heap kind] (config.cpp): a shared heap stays the memfd
  // mapping below, which peers can map too; freed ranges are punched out of
  // the memfd (releaseHeapPages), so it keeps no host memory for them.
  if (!layout_.checker && !shared_heap_ && mapAnonymousHeap()) {
    return ACL_SUCCESS;
  }
  std::string error;
  if (!mapDeviceRange(layout_, heap_base_, capacity_, fd_, 0, &error)) {
    close(fd_);
    fd_ = -1;
    return fail(ACL_ERROR_RT_RESOURCE_ALLOC_FAIL, "aclrtSetDevice: device %u: %s", device_,
                error.c_str());
  }
  return ACL_SUCCESS;
}

bool DeviceMemory::mapAnonymousHeap() {
  // Without the checker, nothing needs a second mapping of aclrtMalloc
  // memory, so it is private anonymous memory, which (unlike memfd pages
  // here) can use transparent huge pages: copies then run at host memcpy
  // speed. The memfd still backs the VMM's physical handles, which may be
  // mapped several times; both draw on the same physical-range allocator.
  void* at = reinterpret_cast<void*>(heap_base_);
  void* p = mmap(at, capacity_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return false; // e.g. strict overcommit: fall back to the memfd mapping
  }
  madvise(p, capacity_, MADV_HUGEPAGE);
  madvise(p, capacity_, MADV_DONTFORK);
  heap_anonymous_ = true;
  return true;
}

aclError DeviceMemory::shareHeap() {
  std::unique_lock lock(mutex_);
  if (!heap_anonymous_) {
    return ACL_SUCCESS;
  }
  // One allocation at a time, so that its private pages go back to the
  // host before the next one's are copied: the heap never needs twice its
  // memory.
  std::vector<HeapAllocation*> moved;
  // Should the heap stay private, the allocations already moved are freed
  // as exported ones are (back to anonymous memory, their memfd pages
  // punched out); revoking their keys finds none.
  auto keepMoved = [&] {
    for (HeapAllocation* allocation : moved) {
      allocation->shared = true;
    }
  };
  for (auto& [p, allocation] : heap_) {
    if (!allocation.shared) {
      if (aclError err =
              shareHeapPages(p - heap_base_, allocation.rounded, "HcclCommInitRootInfo");
          err != ACL_SUCCESS) {
        keepMoved();
        return err;
      }
      moved.push_back(&allocation);
    }
  }
  // The free ranges are holes of the memfd (releaseHeapPages), so mapping
  // it whole adds no memory.
  std::string error;
  if (!mapDeviceRange(layout_, heap_base_, capacity_, fd_, 0, &error)) {
    keepMoved();
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                "HcclCommInitRootInfo: making the memory of device %u shareable failed: %s",
                device_, error.c_str());
  }
  heap_anonymous_ = false;
  return ACL_SUCCESS;
}

void DeviceMemory::releaseHeapPages(uint64_t offset, uint64_t size, bool shared) const {
  void* at = reinterpret_cast<void*>(heap_base_ + offset);
  if (heap_anonymous_ && !shared) {
    madvise(at, size, MADV_DONTNEED);
    return;
  }
  if (heap_anonymous_) {
    // An exported allocation goes back to anonymous memory like the rest
    // of the heap. Should the kernel refuse, the memfd mapping stays: the
    // range works all the same, only without huge pages.
    void* p = mmap(at, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      madvise(p, size, MADV_HUGEPAGE);
      madvise(p, size, MADV_DONTFORK);
    }
  }
  punchHole(offset, size);
}

aclError DeviceMemory::shareHeapPages(uint64_t offset, uint64_t size, const char* api) {
  // Nothing runs on the device meanwhile (the caller drained it), so the
  // copy sees the final contents. The copy goes to the memfd pages of the
  // same offset, which the range allocator reserved for this allocation.
  const char* from = reinterpret_cast<const char*>(heap_base_ + offset);
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd_, from + done, size - done, static_cast<off_t>(offset + done));
    if (n <= 0) {
      if (n < 0 && errno == EINTR) {
        continue;
      }
      const int err = n < 0 ? errno : ENOSPC;
      punchHole(offset, size);
      return fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                  "%s: could not move %s of device %u to shareable memory: %s", api,
                  formatBytes(size).c_str(), device_, std::strerror(err));
    }
    done += static_cast<uint64_t>(n);
  }
  void* at = reinterpret_cast<void*>(heap_base_ + offset);
  if (mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_,
           static_cast<off_t>(offset)) == MAP_FAILED) {
    const int err = errno;
    punchHole(offset, size);
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                "%s: could not map shareable memory of device %u: %s", api, device_,
                std::strerror(err));
  }
  madvise(at, size, MADV_DONTFORK); // as the rest of the heap
  return ACL_SUCCESS;
}

// ---------------------------------------------------------------------------
// Physical ranges

bool DeviceMemory::takePhysical(uint64_t size, uint64_t* offset) {
  auto got = physical_.allocate(size, kPageSize);
  if (!got) {
    return false;
  }
  *offset = *got;
  used_ += size;
  return true;
}

void DeviceMemory::punchHole(uint64_t offset, uint64_t size) const {
  // Returns the pages to the host and zaps them from every mapping. Done
  // before the range goes back to the allocator, so it never hits a new
  // owner's data.
  fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
            static_cast<off_t>(size));
}

aclError DeviceMemory::outOfMemory(const char* api, uint64_t size) const {
  // Called with mutex_ held.
  const uint64_t free_bytes = capacity_ - used_;
  std::string fragmentation;
  if (size <= free_bytes) {
    fragmentation = strFormat(" (largest free block %s: memory is fragmented)",
                              formatBytes(physical_.largestFree()).c_str());
  }
  return fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
              "%s: out of memory on device %u: tried to allocate %s, capacity %s, %s in "
              "use%s",
              api, device_, formatBytes(size).c_str(), formatBytes(capacity_).c_str(),
              formatBytes(used_).c_str(), fragmentation.c_str());
}

// ---------------------------------------------------------------------------
// aclrtMalloc / aclrtFree

aclError DeviceMemory::allocate(void** ptr, size_t size) {
  uint64_t rounded = 0;
  std::unique_lock lock(mutex_);
  uint64_t offset = 0;
  if (!roundUp(size, kPageSize, &rounded) || rounded > capacity_ ||
      !takePhysical(rounded, &offset)) {
    return outOfMemory("aclrtMalloc", size);
  }
  const uintptr_t p = heap_base_ + offset;
  heap_.emplace(p, HeapAllocation{size, rounded});
  lock.unlock();
  *ptr = reinterpret_cast<void*>(p);
  return ACL_SUCCESS;
}

aclError DeviceMemory::free(void* ptr) {
  const uintptr_t p = addr(ptr);
  HeapAllocation allocation{};
  {
    std::unique_lock lock(mutex_);
    auto it = heap_.find(p);
    if (it == heap_.end()) {
      auto after = heap_.upper_bound(p);
      if (after != heap_.begin()) {
        auto before = std::prev(after);
        if (p < before->first + before->second.size) {
          return fail(ACL_ERROR_INVALID_PARAM,
                      "aclrtFree: %p points inside the allocation at %p (%s) on device %u, "
                      "not at its start; pass the pointer aclrtMalloc returned",
                      ptr, reinterpret_cast<void*>(before->first),
                      formatBytes(before->second.size).c_str(), device_);
        }
      }
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtFree: %p is not a live allocation of device %u (freed already, or "
                  "never returned by aclrtMalloc)",
                  ptr, device_);
    }
    allocation = it->second;
    heap_.erase(it);
  }
  if (race::enabled()) {
    race::memoryFreed(p, allocation.rounded);
  }
  const uint64_t offset = p - heap_base_;
  if (allocation.shared) {
    ipc::revokeExports(fd_, offset, allocation.rounded);
  }
  releaseHeapPages(offset, allocation.rounded, allocation.shared);
  std::unique_lock lock(mutex_);
  physical_.release(offset, allocation.rounded);
  used_ -= allocation.rounded;
  return ACL_SUCCESS;
}

void DeviceMemory::memInfo(size_t* free, size_t* total) const {
  std::shared_lock lock(mutex_);
  *free = used_ >= capacity_ ? 0 : capacity_ - used_;
  *total = capacity_;
}

// ---------------------------------------------------------------------------
// Lookups

const DeviceMemory::Reservation* DeviceMemory::findReservation(uintptr_t p,
                                                               uintptr_t* start) const {
  auto it = reservations_.upper_bound(p);
  if (it == reservations_.begin()) {
    return nullptr;
  }
  --it;
  if (p - it->first >= it->second.size) {
    return nullptr;
  }
  *start = it->first;
  return &it->second;
}

bool DeviceMemory::checkRange(uintptr_t p, uint64_t n, std::string* why) const {
  std::shared_lock lock(mutex_);
  if (p < vmm_base_) {
    auto it = heap_.upper_bound(p);
    if (it == heap_.begin() || p - std::prev(it)->first >= std::prev(it)->second.size) {
      *why = strFormat("0x%lx is not inside a live allocation of device %u",
                       static_cast<unsigned long>(p), device_);
      return false;
    }
    --it;
    const uint64_t room = it->first + it->second.size - p;
    if (n > room) {
      *why = strFormat("[0x%lx, +%llu) runs past the end of the %s allocation at 0x%lx on "
                       "device %u",
                       static_cast<unsigned long>(p), static_cast<unsigned long long>(n),
                       formatBytes(it->second.size).c_str(),
                       static_cast<unsigned long>(it->first), device_);
      return false;
    }
    return true;
  }
  uintptr_t start = 0;
  const Reservation* r = findReservation(p, &start);
  if (r == nullptr) {
    *why = strFormat("0x%lx is not inside a reserved virtual address range of device %u",
                     static_cast<unsigned long>(p), device_);
    return false;
  }
  if (n > start + r->size - p) {
    *why = strFormat("[0x%lx, +%llu) runs past the end of the reservation at 0x%lx on "
                     "device %u",
                     static_cast<unsigned long>(p), static_cast<unsigned long long>(n),
                     static_cast<unsigned long>(start), device_);
    return false;
  }
  // Walk the mappings covering [p, p + n); they must be contiguous.
  uintptr_t cursor = p;
  const uintptr_t end = p + (n == 0 ? 1 : n);
  auto it = r->mappings.upper_bound(cursor);
  if (it == r->mappings.begin()) {
    *why = strFormat("0x%lx is reserved but not mapped (aclrtMapMem)",
                     static_cast<unsigned long>(p));
    return false;
  }
  --it;
  while (cursor < end) {
    if (it == r->mappings.end() || it->first > cursor || cursor - it->first >= it->second.size) {
      *why = strFormat("0x%lx is reserved but not mapped (aclrtMapMem)",
                       static_cast<unsigned long>(cursor));
      return false;
    }
    cursor = it->first + it->second.size;
    ++it;
  }
  return true;
}

bool DeviceMemory::lookup(uintptr_t p, DeviceAddressInfo* info) const {
  std::shared_lock lock(mutex_);
  if (p < vmm_base_) {
    auto it = heap_.upper_bound(p);
    if (it == heap_.begin()) {
      return false;
    }
    --it;
    if (p - it->first >= it->second.size) {
      return false;
    }
    info->device = device_;
    info->page_size = static_cast<uint32_t>(kPageSize);
    return true;
  }
  uintptr_t start = 0;
  const Reservation* r = findReservation(p, &start);
  if (r == nullptr) {
    return false;
  }
  auto it = r->mappings.upper_bound(p);
  if (it == r->mappings.begin()) {
    return false;
  }
  --it;
  if (p - it->first >= it->second.size) {
    return false;
  }
  info->device = it->second.owner;
  info->page_size = static_cast<uint32_t>(kVmmGranularity);
  return true;
}

// ---------------------------------------------------------------------------
// Virtual memory

aclError DeviceMemory::reserve(void** virPtr, size_t size, size_t alignment, void* expectPtr) {
  if (size == 0 || size % kVmmGranularity != 0) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtReserveMemAddress: size %zu is not a positive multiple of the "
                "allocation granularity (%s)",
                size, formatBytes(kVmmGranularity).c_str());
  }
  if (alignment != 0 && !isPowerOfTwo(alignment)) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtReserveMemAddress: alignment %zu is not 0 or a power of two", alignment);
  }
  const uint64_t align = alignment < kVmmGranularity ? kVmmGranularity : alignment;
  std::unique_lock lock(mutex_);
  uint64_t start = 0;
  if (expectPtr != nullptr) {
    const uintptr_t want = addr(expectPtr);
    if (want - vmm_base_ >= layout_.vmm_size || want % align != 0) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtReserveMemAddress: expectPtr %p is not a suitably aligned address in "
                  "the virtual memory window of device %u [0x%lx, 0x%lx)",
                  expectPtr, device_, static_cast<unsigned long>(vmm_base_),
                  static_cast<unsigned long>(vmm_base_ + layout_.vmm_size));
    }
    if (!virtual_.allocateAt(want, size)) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtReserveMemAddress: [%p, +%s) is not free in the virtual memory window "
                  "of device %u",
                  expectPtr, formatBytes(size).c_str(), device_);
    }
    start = want;
  } else {
    auto got = virtual_.allocate(size, align);
    if (!got) {
      return fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                  "aclrtReserveMemAddress: out of virtual address space on device %u: tried "
                  "to reserve %s, the window has %s (largest free range %s)",
                  device_, formatBytes(size).c_str(), formatBytes(layout_.vmm_size).c_str(),
                  formatBytes(virtual_.largestFree()).c_str());
    }
    start = *got;
  }
  reservations_.emplace(start, Reservation{size, {}});
  *virPtr = reinterpret_cast<void*>(start);
  return ACL_SUCCESS;
}

aclError DeviceMemory::release(void* virPtr) {
  std::unique_lock lock(mutex_);
  auto it = reservations_.find(addr(virPtr));
  if (it == reservations_.end()) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtReleaseMemAddress: %p is not the start of a reservation of device %u",
                virPtr, device_);
  }
  if (it->second.imported) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtReleaseMemAddress: %p is IPC memory imported with "
                "aclrtIpcMemImportByKey; release it with aclrtIpcMemClose",
                virPtr);
  }
  if (!it->second.mappings.empty()) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtReleaseMemAddress: the reservation at %p still has %zu mapping(s); "
                "aclrtUnmapMem them first",
                virPtr, it->second.mappings.size());
  }
  virtual_.release(it->first, it->second.size);
  reservations_.erase(it);
  return ACL_SUCCESS;
}

aclError DeviceMemory::map(void* virPtr, size_t size, size_t offset, PhysicalHandle* handle,
                           const PhysicalHandle& pinned) {
  // `pinned` is a copy of the handle taken while pinning it (pinHandle on
  // its owner), so the owner cannot free it while we map.
  const uintptr_t p = addr(virPtr);
  if (size == 0 || size % kVmmGranularity != 0 || offset % kVmmGranularity != 0 ||
      p % kVmmGranularity != 0) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtMapMem: address %p, size %zu and offset %zu must be multiples of the "
                "allocation granularity (%s), size not zero",
                virPtr, size, offset, formatBytes(kVmmGranularity).c_str());
  }
  if (offset > pinned.size || size > pinned.size - offset) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtMapMem: [offset %zu, +%zu) exceeds the %s physical allocation", offset,
                size, formatBytes(pinned.size).c_str());
  }
  std::unique_lock lock(mutex_);
  uintptr_t start = 0;
  auto* r = const_cast<Reservation*>(findReservation(p, &start));
  if (r == nullptr || r->imported || size > start + r->size - p) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtMapMem: [%p, +%s) is not inside one reservation of device %u "
                "(aclrtReserveMemAddress)%s",
                virPtr, formatBytes(size).c_str(), device_,
                r != nullptr && r->imported ? "; it is imported IPC memory" : "");
  }
  auto next = r->mappings.lower_bound(p);
  const bool overlaps_next = next != r->mappings.end() && next->first < p + size;
  const bool overlaps_prev = next != r->mappings.begin() &&
      std::prev(next)->first + std::prev(next)->second.size > p;
  if (overlaps_next || overlaps_prev) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtMapMem: [%p, +%s) overlaps an existing mapping; aclrtUnmapMem it first",
                virPtr, formatBytes(size).c_str());
  }
  std::string error;
  if (!mapDeviceRange(layout_, p, size, pinned.fd, pinned.offset + offset, &error)) {
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMapMem: %s", error.c_str());
  }
  r->mappings.emplace(p, Mapping{size, handle, pinned.device, offset});
  return ACL_SUCCESS;
}

aclError DeviceMemory::unmap(void* virPtr, PhysicalHandle** handle, uint32_t* owner) {
  const uintptr_t p = addr(virPtr);
  std::unique_lock lock(mutex_);
  uintptr_t start = 0;
  auto* r = const_cast<Reservation*>(findReservation(p, &start));
  if (r == nullptr || r->mappings.count(p) == 0) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtUnmapMem: %p is not the start of a mapping (aclrtMapMem) on device %u",
                virPtr, device_);
  }
  if (r->imported) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtUnmapMem: %p is IPC memory imported with aclrtIpcMemImportByKey; "
                "release it with aclrtIpcMemClose",
                virPtr);
  }
  auto it = r->mappings.find(p);
  std::string error;
  if (!unmapDeviceRange(layout_, p, it->second.size, &error)) {
    return fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtUnmapMem: %s", error.c_str());
  }
  if (race::enabled()) {
    race::memoryFreed(p, it->second.size);
  }
  *handle = it->second.handle;
  *owner = it->second.owner;
  r->mappings.erase(it);
  return ACL_SUCCESS;
}

// ---------------------------------------------------------------------------
// Physical handles

aclError DeviceMemory::allocatePhysical(size_t size, PhysicalHandle** handle) {
  if (size == 0 || size % kVmmGranularity != 0) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtMallocPhysical: size %zu is not a positive multiple of the allocation "
                "granularity (%s)",
                size, formatBytes(kVmmGranularity).c_str());
  }
  std::unique_lock lock(mutex_);
  uint64_t offset = 0;
  if (size > capacity_ || !takePhysical(size, &offset)) {
    return outOfMemory("aclrtMallocPhysical", size);
  }
  auto* h = new PhysicalHandle{device_, offset, size, 0, fd_};
  handles_.insert(h);
  *handle = h;
  return ACL_SUCCESS;
}

aclError DeviceMemory::freePhysical(PhysicalHandle* handle) {
  {
    std::unique_lock lock(mutex_);
    if (handles_.count(handle) == 0) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtFreePhysical: %p is not a live physical memory handle",
                  static_cast<void*>(handle));
    }
    if (handle->map_count != 0) {
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtFreePhysical: the handle is still mapped %u time(s); aclrtUnmapMem "
                  "first",
                  handle->map_count);
    }
    handles_.erase(handle);
  }
  ipc::revokeExports(fd_, handle->offset, handle->size);
  punchHole(handle->offset, handle->size);
  std::unique_lock lock(mutex_);
  physical_.release(handle->offset, handle->size);
  used_ -= handle->size;
  delete handle;
  return ACL_SUCCESS;
}

bool DeviceMemory::ownsHandle(const PhysicalHandle* handle) const {
  std::shared_lock lock(mutex_);
  return handles_.count(const_cast<PhysicalHandle*>(handle)) != 0;
}

bool DeviceMemory::pinHandle(PhysicalHandle* handle, PhysicalHandle* copy) {
  std::unique_lock lock(mutex_);
  if (handles_.count(handle) == 0) {
    return false;
  }
  ++handle->map_count;
  *copy = *handle;
  return true;
}

void DeviceMemory::unpinHandle(PhysicalHandle* handle) {
  std::unique_lock lock(mutex_);
  --handle->map_count;
}

// ---------------------------------------------------------------------------
// IPC (Note [IPC memory], ipc_memory.h)

const std::pair<const uintptr_t, DeviceMemory::HeapAllocation>* DeviceMemory::findHeapAllocation(
    uintptr_t p) const {
  auto it = heap_.upper_bound(p);
  if (it == heap_.begin()) {
    return nullptr;
  }
  --it;
  return p - it->first < it->second.size ? &*it : nullptr;
}

bool DeviceMemory::exportNeedsSharedPages(uintptr_t p) const {
  if (!heap_anonymous_ || p >= vmm_base_) {
    return false;
  }
  std::shared_lock lock(mutex_);
  const auto* allocation = findHeapAllocation(p);
  return allocation != nullptr && !allocation->second.shared;
}

aclError DeviceMemory::exportPieces(uintptr_t p, uint64_t size, std::vector<SharedPiece>* pieces,
                                    uint64_t* lead) {
  std::string why;
  if (!checkRange(p, size, &why)) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtIpcMemGetExportKey: %s", why.c_str());
  }
  const uintptr_t first_page = p & ~(kPageSize - 1);
  const uintptr_t end = p + size;
  *lead = p - first_page;
  pieces->clear();
  std::unique_lock lock(mutex_);
  if (p < vmm_base_) {
    auto* allocation = const_cast<std::pair<const uintptr_t, HeapAllocation>*>(
        findHeapAllocation(p));
    if (allocation == nullptr) { // freed since checkRange
      return fail(ACL_ERROR_INVALID_PARAM,
                  "aclrtIpcMemGetExportKey: 0x%lx is not inside a live allocation of device %u",
                  static_cast<unsigned long>(p), device_);
    }
    const uint64_t alloc_offset = allocation->first - heap_base_;
    if (heap_anonymous_ && !allocation->second.shared) {
      if (aclError err = shareHeapPages(alloc_offset, allocation->second.rounded,
                                          "aclrtIpcMemGetExportKey");
          err != ACL_SUCCESS) {
        return err;
      }
    }
    // Also in a heap that is the memfd throughout (checker, shared heap):
    // freeing the allocation must revoke its keys.
    allocation->second.shared = true;
    // Allocations start on a page and own whole pages: the pieces never
    // reach a neighbour.
    uint64_t bytes = 0;
    roundUp(end - first_page, kPageSize, &bytes);
    pieces->push_back(SharedPiece{fd_, first_page - heap_base_, bytes});
    return ACL_SUCCESS;
  }
  // Virtual memory: the mappings covering the range (checkRange found them
  // contiguous), each a piece of its physical handle's memfd.
  uintptr_t start = 0;
  const Reservation* r = findReservation(p, &start);
  if (r == nullptr || r->imported) {
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtIpcMemGetExportKey: 0x%lx is %s", static_cast<unsigned long>(p),
                r == nullptr ? "not mapped any more"
                             : "IPC memory imported from another process; export the "
                               "original in its own process");
  }
  auto it = std::prev(r->mappings.upper_bound(p));
  for (uintptr_t cursor = first_page; cursor < end; ++it) {
    const uint64_t into = cursor - it->first;
    const uint64_t mapped_end = it->first + it->second.size;
    uint64_t bytes = 0;
    roundUp(std::min<uint64_t>(end, mapped_end) - cursor, kPageSize, &bytes);
    const PhysicalHandle* handle = it->second.handle;
    pieces->push_back(
        SharedPiece{handle->fd, handle->offset + it->second.handle_offset + into, bytes});
    cursor = mapped_end;
  }
  return ACL_SUCCESS;
}

aclError DeviceMemory::mapShared(const std::vector<SharedPiece>& pieces, uintptr_t* base) {
  uint64_t total = 0;
  for (const SharedPiece& piece : pieces) {
    total += piece.size;
  }
  uint64_t reserved = 0;
  if (total == 0 || !roundUp(total, kVmmGranularity, &reserved)) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtIpcMemImportByKey: the key shares no memory");
  }
  std::unique_lock lock(mutex_);
  auto got = virtual_.allocate(reserved, kVmmGranularity);
  if (!got) {
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                "aclrtIpcMemImportByKey: out of virtual address space on device %u: tried to "
                "map %s (largest free range %s)",
                device_, formatBytes(total).c_str(), formatBytes(virtual_.largestFree()).c_str());
  }
  Reservation reservation{reserved, {}, true};
  uintptr_t cursor = *got;
  for (const SharedPiece& piece : pieces) {
    std::string error;
    if (!mapDeviceRange(layout_, cursor, piece.size, piece.fd, piece.offset, &error)) {
      for (const auto& [at, mapping] : reservation.mappings) {
        unmapDeviceRange(layout_, at, mapping.size, &error);
      }
      virtual_.release(*got, reserved);
      return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtIpcMemImportByKey: %s", error.c_str());
    }
    reservation.mappings.emplace(cursor, Mapping{piece.size, nullptr, device_, 0});
    cursor += piece.size;
  }
  reservations_.emplace(*got, std::move(reservation));
  *base = *got;
  return ACL_SUCCESS;
}

aclError DeviceMemory::unmapShared(uintptr_t base) {
  std::unique_lock lock(mutex_);
  auto it = reservations_.find(base);
  if (it == reservations_.end() || !it->second.imported) {
    return fail(ACL_ERROR_RT_INTERNAL_ERROR,
                "aclrtIpcMemClose: the imported memory at 0x%lx is gone",
                static_cast<unsigned long>(base));
  }
  std::string error;
  for (const auto& [at, mapping] : it->second.mappings) {
    if (race::enabled()) {
      race::memoryFreed(at, mapping.size);
    }
    if (!unmapDeviceRange(layout_, at, mapping.size, &error)) {
      return fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtIpcMemClose: %s", error.c_str());
    }
  }
  virtual_.release(it->first, it->second.size);
  reservations_.erase(it);
  return ACL_SUCCESS;
}

} // namespace npu_sim
