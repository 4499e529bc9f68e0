// The memory of one simulated device.
//
// Physical memory is one memfd of `capacity` bytes. ftruncate makes it
// sparse: a page costs host memory only once touched, and freeing a range
// punches a hole so the host gets the pages back. A best-fit range
// allocator hands out page-rounded ranges of it, both to aclrtMalloc and
// to aclrtMallocPhysical; "in use" counts the rounded bytes.
//
// aclrtMalloc returns heap_base + offset: the whole memfd is mapped once
// at the heap part of the device's window, so allocation needs no mmap.
// The VMM part of the window is for aclrtReserveMemAddress / aclrtMapMem.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <shared_mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "acl_types.h"
#include "address_space.h"
#include "range_allocator.h"

namespace npu_sim {

// aclrtDrvMemHandle: a physical range of one device's memfd.
struct PhysicalHandle {
  uint32_t device = 0;   // logical id of the owning device
  uint64_t offset = 0;   // in the memfd
  uint64_t size = 0;
  uint32_t map_count = 0; // guarded by the owner's lock
  int fd = -1;
};

// A page range of a device's memfd that IPC shares (Note [IPC memory],
// ipc_memory.h): what an export lists and an import maps.
struct SharedPiece {
  int fd = -1;          // the memfd, a descriptor of the process holding it
  uint64_t offset = 0;  // in the memfd, page aligned
  uint64_t size = 0;    // page multiple
};

// Where a device address lives, for aclrtPointerGetAttributes.
struct DeviceAddressInfo {
  uint32_t device = 0;
  uint32_t page_size = 0;
};

class DeviceMemory {
 public:
  // `shared_heap`: aclrtMalloc memory is the memfd, mapped MAP_SHARED, so
  // that other processes can map it (Note [Device heap kind], config.cpp);
  // otherwise private huge pages unless the checker is on.
  DeviceMemory(uint32_t device, const AddressLayout& layout, uint64_t capacity,
               bool shared_heap);
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Creates the memfd and maps it at the heap part of the window.
  aclError initialize();

  // ---- aclrtMalloc / aclrtFree ----
  aclError allocate(void** ptr, size_t size);
  aclError free(void* ptr);
  void memInfo(size_t* free, size_t* total) const;

  // ---- lookups (any thread, shared lock) ----
  // True when [p, p + n) lies inside one live allocation, or inside
  // contiguous mappings of one reservation; otherwise explains why.
  bool checkRange(uintptr_t p, uint64_t n, std::string* why) const;
  bool lookup(uintptr_t p, DeviceAddressInfo* info) const;

  // ---- virtual memory in this device's VMM window ----
  aclError reserve(void** virPtr, size_t size, size_t alignment, void* expectPtr);
  aclError release(void* virPtr);
  aclError map(void* virPtr, size_t size, size_t offset, PhysicalHandle* handle,
               const PhysicalHandle& pinned);
  // On success returns the unmapped handle and its owner, to unpin.
  aclError unmap(void* virPtr, PhysicalHandle** handle, uint32_t* owner);

  // ---- physical handles owned by this device ----
  aclError allocatePhysical(size_t size, PhysicalHandle** handle);
  aclError freePhysical(PhysicalHandle* handle);
  // Pins a handle for mapping (fails if it is not a live handle of this
  // device); unpinHandle undoes it.
  bool pinHandle(PhysicalHandle* handle, PhysicalHandle* copy);
  void unpinHandle(PhysicalHandle* handle);
  bool ownsHandle(const PhysicalHandle* handle) const;

  // ---- IPC (Note [IPC memory], ipc_memory.h) ----
  // True when [p, p + size) lies in an aclrtMalloc allocation whose pages
  // are still private anonymous memory, so exporting it first moves them
  // to the memfd (shareHeapPages); the caller drains the device before.
  bool exportNeedsSharedPages(uintptr_t p) const;
  // The memfd pieces behind the pages of [p, p + size), in address order;
  // `lead` is p's offset in the first page. Moves an aclrtMalloc
  // allocation's pages to the memfd first (once; they stay there until it
  // is freed).
  aclError exportPieces(uintptr_t p, uint64_t size, std::vector<SharedPiece>* pieces,
                        uint64_t* lead);
  // Maps `pieces` (descriptors of this process) one after the other in a
  // new reservation of this device's VMM window; aclrtUnmapMem and
  // aclrtReleaseMemAddress refuse it, unmapShared undoes it.
  aclError mapShared(const std::vector<SharedPiece>& pieces, uintptr_t* base);
  aclError unmapShared(uintptr_t base);

  uint32_t device() const {
    return device_;
  }

  // ---- peers' mappings (Note [Direct collectives], collective_comm.cpp) ----
  // Whether every aclrtMalloc allocation lives in the memfd at its heap
  // offset, so that a process mapping the memfd sees them all (set by
  // initialize; shareHeap turns it on later, never off).
  bool heapShared() const {
    return fd_ >= 0 && !heap_anonymous_.load();
  }
  // Makes a private heap shared (Note [Device heap kind], config.cpp):
  // moves the live allocations' pages to the memfd, then maps the memfd
  // over the whole heap, at the same addresses. The caller drains the
  // device first, as for an IPC export. A no-op on a shared heap; on
  // failure the heap stays private (the allocations already moved stay in
  // the memfd, as exported ones do).
  aclError shareHeap();
  // The memfd (a descriptor of this process) and where its offset 0 is
  // mapped for host access; heap addresses are this plus their offset.
  int memfd() const {
    return fd_;
  }
  uintptr_t heapHostBase() const {
    return layout_.toHost(heap_base_);
  }
  uint64_t capacity() const {
    return capacity_;
  }

 private:
  struct HeapAllocation {
    uint64_t size;    // requested
    uint64_t rounded; // pages taken from the memfd
    // Exported through IPC: freeing it revokes its keys, and its pages are
    // mapped from the memfd even when the rest of the heap is anonymous
    // memory.
    bool shared = false;
  };
  struct Mapping {
    uint64_t size;
    PhysicalHandle* handle; // null in an imported (IPC) reservation
    uint32_t owner;         // device of the physical memory
    uint64_t handle_offset = 0; // aclrtMapMem's offset into the handle
  };
  struct Reservation {
    uint64_t size;
    std::map<uintptr_t, Mapping> mappings;
    bool imported = false; // made by mapShared
  };

  // Physical ranges; the caller holds mutex_ exclusively.
  bool takePhysical(uint64_t size, uint64_t* offset);
  void punchHole(uint64_t offset, uint64_t size) const;
  // Maps the aclrtMalloc heap as anonymous memory (checker off); false if
  // the kernel refuses, leaving the memfd mapping to be used.
  bool mapAnonymousHeap();
  // Returns freed aclrtMalloc pages to the host.
  void releaseHeapPages(uint64_t offset, uint64_t size, bool shared) const;
  // Moves an anonymous heap range's pages to the memfd (copying them) and
  // maps the memfd there instead; the caller holds mutex_ exclusively.
  // `api` names the call in errors.
  aclError shareHeapPages(uint64_t offset, uint64_t size, const char* api);
  // Finds the heap allocation containing p; the caller holds mutex_.
  const std::pair<const uintptr_t, HeapAllocation>* findHeapAllocation(uintptr_t p) const;
  aclError outOfMemory(const char* api, uint64_t size) const;
  const Reservation* findReservation(uintptr_t p, uintptr_t* start) const;

  const uint32_t device_;
  const AddressLayout& layout_;
  const uint64_t capacity_;
  const bool shared_heap_;
  const uintptr_t heap_base_;
  const uintptr_t vmm_base_;
  int fd_ = -1;
  // Read without the lock by releaseHeapPages and heapShared; written
  // under mutex_ (initialize, shareHeap).
  std::atomic<bool> heap_anonymous_{false};

  mutable std::shared_mutex mutex_;
  RangeAllocator physical_;
  uint64_t used_ = 0;
  std::map<uintptr_t, HeapAllocation> heap_;
  RangeAllocator virtual_;
  std::map<uintptr_t, Reservation> reservations_;
  std::unordered_set<PhysicalHandle*> handles_;
};

} // namespace npu_sim
